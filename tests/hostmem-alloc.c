// SPDX-License-Identifier: MIT
/* Pinned host memory: exact sizes, writable end to end, locked, THP or not, node placement, bad params, stats, hugetlb. */
#include "config.h"

#include <errno.h>
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostmem-util.h"

#define MIB (1ull << 20)

static struct haccel_hostmem *alloc_ok(struct haccel_ctx *ctx, uint64_t bytes,
				       uint32_t flags, int node)
{
	struct haccel_hostmem_params p;
	struct haccel_hostmem *m = NULL;
	int ret;

	haccel_hostmem_params_init(&p);
	p.bytes = bytes;
	p.flags = flags;
	p.node = node;
	ret = haccel_hostmem_alloc(ctx, &p, &m);
	if (ret)
		ktap_fail_at(__FILE__, __LINE__, "alloc of %llu bytes: %d (%s)",
			     (unsigned long long)bytes, ret, hm_err(ctx));
	KTAP_ASSERT(ret == 0 && m);
	return m;
}

static struct haccel_hostmem_info info_of(const struct haccel_hostmem *m)
{
	struct haccel_hostmem_info i;

	KTAP_ASSERT_EQ(haccel_hostmem_info(m, &i), 0);
	return i;
}

/* Skip unless bytes can be locked here; as root with CAP_IPC_LOCK it can. */
static void need_lock(uint64_t bytes)
{
	char why[160];

	if (!hm_can_lock(bytes, why, sizeof(why)))
		ktap_skip("%s", why);
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* "hg" (MADV_HUGEPAGE) or "nh" (MADV_NOHUGEPAGE) in the VmFlags of ptr's VMA. */
static int vma_has_flag(const void *ptr, const char *flag)
{
	char line[512];
	int in = 0, has = -1;
	FILE *f = fopen("/proc/self/smaps", "r");

	KTAP_ASSERT(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)ptr >= lo && (uintptr_t)ptr < hi;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			char pat[8];

			snprintf(pat, sizeof(pat), " %s", flag);
			has = strstr(line + 8, pat) != NULL;
			break;
		}
	}
	fclose(f);
	KTAP_ASSERT(has >= 0);
	return has;
}

static void fill_and_check(const struct haccel_hostmem_info *i)
{
	uint8_t *b = i->ptr;

	for (uint64_t k = 0; k < i->bytes; k++)
		b[k] = (uint8_t)(k * 131 + 7);
	for (uint64_t k = 0; k < i->bytes; k++)
		if (b[k] != (uint8_t)(k * 131 + 7)) {
			ktap_fail_at(__FILE__, __LINE__, "byte %llu reads back wrong",
				     (unsigned long long)k);
			return;
		}
	/* The rounding tail is mapped too and writable. */
	memset(b + i->bytes, 0xee, (size_t)(i->mapped_bytes - i->bytes));
}

static void t_sizes_exact(void)
{
	static const uint64_t sizes[] = { 1, 4097, 2 * MIB, 3 * MIB + 1 };
	long pg = sysconf(_SC_PAGESIZE);
	struct haccel_ctx *ctx;

	need_lock(8 * MIB);
	ctx = hm_ctx();
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct haccel_hostmem *m = alloc_ok(ctx, sizes[s], 0, HACCEL_NODE_ANY);
		struct haccel_hostmem_info i = info_of(m);

		KTAP_EXPECT_EQ(i.bytes, sizes[s]);
		KTAP_EXPECT_EQ(i.page_size, pg);
		/* Rounded to the page, never to a power of two. */
		KTAP_EXPECT_EQ(i.mapped_bytes, round_up(sizes[s], (uint64_t)pg));
		KTAP_EXPECT_EQ(i.pinned, 1);
		KTAP_EXPECT_EQ(i.node, -1);
		KTAP_EXPECT_EQ(i.reserved, 0);
		if (i.mapped_bytes >= 2 * MIB)
			KTAP_EXPECT_EQ((uintptr_t)i.ptr % (2 * MIB), 0);
		fill_and_check(&i);
		haccel_hostmem_free(m);
	}
	KTAP_EXPECT_EQ(hm_errors, 0);
	haccel_close(ctx);
}

static int thp_mode_madvise_or_always(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

static void t_thp_default(void)
{
	struct haccel_hostmem *m;
	struct haccel_hostmem_info i;
	struct haccel_ctx *ctx;

	need_lock(4 * MIB);
	if (!thp_mode_madvise_or_always())
		ktap_skip("transparent huge pages are off (or absent) on this kernel");
	ctx = hm_ctx();
	m = alloc_ok(ctx, 4 * MIB, 0, HACCEL_NODE_ANY);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.huge, HACCEL_HUGE_THP);
	KTAP_EXPECT_EQ(i.page_size, sysconf(_SC_PAGESIZE));
	KTAP_EXPECT_EQ((uintptr_t)i.ptr % (2 * MIB), 0);
	KTAP_EXPECT(vma_has_flag(i.ptr, "hg"));
	KTAP_EXPECT(!vma_has_flag(i.ptr, "nh"));
	KTAP_EXPECT(vma_has_flag(i.ptr, "lo")); /* VM_LOCKED */
	fill_and_check(&i);
	haccel_hostmem_free(m);
	haccel_close(ctx);
}

static void t_no_huge(void)
{
	struct haccel_hostmem *m;
	struct haccel_hostmem_info i;
	struct haccel_ctx *ctx;

	need_lock(4 * MIB);
	ctx = hm_ctx();
	m = alloc_ok(ctx, 4 * MIB + 1, HACCEL_HOSTMEM_NO_HUGE, HACCEL_NODE_ANY);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.huge, HACCEL_HUGE_NONE);
	KTAP_EXPECT_EQ(i.page_size, sysconf(_SC_PAGESIZE));
	KTAP_EXPECT_EQ(i.mapped_bytes, 4 * MIB + (uint64_t)sysconf(_SC_PAGESIZE));
	KTAP_EXPECT(vma_has_flag(i.ptr, "nh"));
	KTAP_EXPECT(!vma_has_flag(i.ptr, "hg"));
	fill_and_check(&i);
	haccel_hostmem_free(m);
	haccel_close(ctx);
}

/* The policy on the buffer is MPOL_BIND to node, and sampled pages are there. */
static void expect_on_node(const struct haccel_hostmem_info *i, int node)
{
	unsigned long mask[1024 / (8 * sizeof(unsigned long)) + 1];
	const uint64_t offs[] = { 0, i->mapped_bytes / 2, i->mapped_bytes - 1 };
	int mode = -1;

	memset(mask, 0, sizeof(mask));
	KTAP_ASSERT_EQ(get_mempolicy(&mode, mask, 1024 + 1, i->ptr, MPOL_F_ADDR), 0);
	KTAP_EXPECT_EQ(mode, MPOL_BIND);
	for (int n = 0; n < 1024; n++)
		KTAP_EXPECT_EQ((mask[n / (8 * sizeof(unsigned long))] >>
				(n % (8 * sizeof(unsigned long)))) & 1,
			       n == node);
	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		int where = -1;

		KTAP_ASSERT_EQ(get_mempolicy(&where, NULL, 0, (char *)i->ptr + offs[k],
					     MPOL_F_NODE | MPOL_F_ADDR), 0);
		KTAP_EXPECT_EQ(where, node);
	}
}

static void t_node0_placement(void)
{
	struct haccel_hostmem *m;
	struct haccel_hostmem_info i;
	struct haccel_hostmem_stats s;
	struct haccel_ctx *ctx;

	need_lock(4 * MIB);
	unsetenv("HACCEL_SYSFS_ROOT");
	ctx = hm_ctx();
	m = alloc_ok(ctx, 3 * MIB + 1, 0, 0);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.node, 0);
	KTAP_EXPECT_EQ(i.pinned, 1);
	expect_on_node(&i, 0);
	fill_and_check(&i);
	s = hm_stats(ctx);
	KTAP_EXPECT_EQ(s.bytes_pinned[0], i.mapped_bytes);
	KTAP_EXPECT_EQ(s.bytes_pinned_unplaced, 0);
	KTAP_EXPECT_EQ(s.fallbacks_unplaced, 0);
	KTAP_EXPECT_EQ(hm_warnings, 0);
	haccel_hostmem_free(m);
	haccel_close(ctx);
}

/*
 * Over a GiB: still rounded to the page only (not to 2 GiB), bound, and the
 * placement check samples more than the first and last page.
 */
static void t_large_exact(void)
{
	struct haccel_numa_node nodes[1];
	struct haccel_hostmem *m;
	struct haccel_hostmem_info i;
	struct haccel_ctx *ctx;
	const uint64_t bytes = (1ull << 30) + 1;

	need_lock(bytes + 4096);
	unsetenv("HACCEL_SYSFS_ROOT");
	ctx = hm_ctx();
	KTAP_ASSERT(haccel_numa_nodes(ctx, nodes, 1) >= 1);
	if (nodes[0].mem_free && nodes[0].mem_free < 3 * bytes)
		ktap_skip("node 0 has only %llu bytes free", (unsigned long long)nodes[0].mem_free);
	m = alloc_ok(ctx, bytes, 0, 0);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.bytes, bytes);
	KTAP_EXPECT_EQ(i.mapped_bytes, round_up(bytes, (uint64_t)sysconf(_SC_PAGESIZE)));
	KTAP_EXPECT_EQ(i.pinned, 1);
	KTAP_EXPECT_EQ(i.node, 0);
	expect_on_node(&i, 0);
	/* Writable at both ends and across the GiB boundary. */
	((volatile char *)i.ptr)[0] = 1;
	((volatile char *)i.ptr)[(1ull << 30) - 1] = 2;
	((volatile char *)i.ptr)[1ull << 30] = 3;
	KTAP_EXPECT_EQ(((volatile char *)i.ptr)[1ull << 30], 3);
	KTAP_EXPECT_EQ(hm_stats(ctx).bytes_pinned[0], i.mapped_bytes);
	haccel_hostmem_free(m);
	KTAP_EXPECT_EQ(hm_stats(ctx).bytes_pinned[0], 0);
	haccel_close(ctx);
}

/* Every node with memory, on a multi-node machine. */
static void t_every_node(void)
{
	struct haccel_numa_node nodes[HACCEL_MAX_NODES];
	struct haccel_ctx *ctx;
	int n, tried = 0;

	need_lock(8 * MIB);
	unsetenv("HACCEL_SYSFS_ROOT");
	ctx = hm_ctx();
	n = haccel_numa_nodes(ctx, nodes, HACCEL_MAX_NODES);
	KTAP_ASSERT(n >= 1);
	if (n == 1)
		ktap_skip("one NUMA node here (node 0 is covered by t_node0_placement)");
	for (int k = 0; k < n && k < HACCEL_MAX_NODES; k++) {
		struct haccel_hostmem *m;
		struct haccel_hostmem_info i;

		if (nodes[k].mem_free < 64 * MIB)
			continue;
		m = alloc_ok(ctx, 8 * MIB + 3, 0, nodes[k].id);
		i = info_of(m);
		KTAP_EXPECT_EQ(i.node, nodes[k].id);
		expect_on_node(&i, nodes[k].id);
		KTAP_EXPECT_EQ(hm_stats(ctx).bytes_pinned[nodes[k].id], i.mapped_bytes);
		haccel_hostmem_free(m);
		tried++;
	}
	ktap_diag("%d nodes with memory checked", tried);
	KTAP_EXPECT(tried >= 2);
	haccel_close(ctx);
}

static void t_node_any(void)
{
	struct haccel_hostmem *m;
	struct haccel_hostmem_info i;
	struct haccel_hostmem_stats s;
	struct haccel_ctx *ctx;
	int mode = -1;

	need_lock(MIB);
	ctx = hm_ctx();
	m = alloc_ok(ctx, MIB, 0, HACCEL_NODE_ANY);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.node, -1);
	/* No policy of its own: the process default applies. */
	KTAP_ASSERT_EQ(get_mempolicy(&mode, NULL, 0, i.ptr, MPOL_F_ADDR), 0);
	KTAP_EXPECT_EQ(mode, MPOL_DEFAULT);
	s = hm_stats(ctx);
	KTAP_EXPECT_EQ(s.bytes_pinned_unplaced, i.mapped_bytes);
	KTAP_EXPECT_EQ(s.bytes_pinned[0], 0);
	KTAP_EXPECT_EQ(s.buffers, 1);
	KTAP_EXPECT_EQ(s.fallbacks_unplaced, 0);
	haccel_hostmem_free(m);
	haccel_close(ctx);
}

static void expect_refused(struct haccel_ctx *ctx,
			   const struct haccel_hostmem_params *p, int status,
			   const char *needle, int line)
{
	struct haccel_hostmem_stats before = hm_stats(ctx), after;
	struct haccel_hostmem *m = (struct haccel_hostmem *)p; /* not NULL */
	int ret = haccel_hostmem_alloc(ctx, p, &m);

	if (ret != status)
		ktap_fail_at(__FILE__, line, "alloc: %d, want %d (%s)", ret, status,
			     hm_err(ctx));
	if (m)
		ktap_fail_at(__FILE__, line, "*out not cleared on failure");
	if (!strstr(hm_err(ctx), needle))
		ktap_fail_at(__FILE__, line, "last error lacks \"%s\": %s", needle,
			     hm_err(ctx));
	after = hm_stats(ctx);
	if (memcmp(&before, &after, sizeof(before)))
		ktap_fail_at(__FILE__, line, "stats changed by a refused alloc");
}

static void t_bad_params(void)
{
	struct haccel_hostmem_params p;
	struct haccel_hostmem *m = NULL;
	struct haccel_ctx *ctx;
	struct {
		struct haccel_hostmem_params p;
		uint64_t extra;
	} big;

	ctx = hm_ctx();
	haccel_hostmem_params_init(&p);
	p.bytes = 4096;
	KTAP_EXPECT_EQ(haccel_hostmem_alloc(NULL, &p, &m), -EINVAL);
	KTAP_EXPECT_EQ(haccel_hostmem_alloc(ctx, NULL, &m), -EINVAL);
	HM_EXPECT_ERR(ctx, "NULL params");
	KTAP_EXPECT_EQ(haccel_hostmem_alloc(ctx, &p, NULL), -EINVAL);
	HM_EXPECT_ERR(ctx, "NULL out");

#define REFUSE(field, value, status, needle)                                  \
	do {                                                                  \
		haccel_hostmem_params_init(&p);                               \
		p.bytes = 4096;                                               \
		p.field = value;                                              \
		expect_refused(ctx, &p, status, needle, __LINE__);            \
	} while (0)
	REFUSE(flags, 1u << 4, -EINVAL, "unknown flags 0x10");
	REFUSE(flags, 1u << 31, -EINVAL, "unknown flags 0x80000000");
	REFUSE(flags, HACCEL_HOSTMEM_HUGETLB | HACCEL_HOSTMEM_NO_HUGE, -EINVAL,
	       "contradict");
	REFUSE(reserved, 1, -EINVAL, "reserved");
	REFUSE(bytes, 0, -EINVAL, "bytes is 0");
	REFUSE(bytes, UINT64_MAX, -EINVAL, "larger than any address space");
	REFUSE(bytes, UINT64_MAX - 4095, -EINVAL, "larger than any address space");
	REFUSE(size, 8, -EINVAL, "params size 8");
	REFUSE(size, 0, -EINVAL, "params size 0");
	REFUSE(node, HACCEL_MAX_NODES - 1, -ENODEV, "no NUMA node 63");
	REFUSE(node, -2, -ENODEV, "node -2");
	REFUSE(node, 5000, -ENODEV, "node 5000");
	REFUSE(node, INT32_MIN, -ENODEV, "HACCEL_NODE_ANY");
#undef REFUSE

	/* Past the size check, but no huge page pool could hold it: no advice
	 * to reserve 2^43 pages. */
	haccel_hostmem_params_init(&p);
	p.flags = HACCEL_HOSTMEM_HUGETLB;
	p.bytes = UINT64_MAX - 4 * MIB;
	expect_refused(ctx, &p, -ENOMEM, "too large a request", __LINE__);
	KTAP_EXPECT(!strstr(hm_err(ctx), "echo"));

	/* A larger struct from a newer caller: zero tail fine, else refused. */
	memset(&big, 0, sizeof(big));
	haccel_hostmem_params_init(&big.p);
	big.p.size = sizeof(big);
	big.p.bytes = 4096;
	big.p.flags = HACCEL_HOSTMEM_ALLOW_UNPINNED;
	KTAP_EXPECT_EQ(haccel_hostmem_alloc(ctx, &big.p, &m), 0);
	haccel_hostmem_free(m);
	big.extra = 1;
	expect_refused(ctx, &big.p, -EINVAL, "params size 32", __LINE__);

	KTAP_EXPECT_EQ(hm_stats(ctx).buffers, 0);
	haccel_close(ctx);
}

static void t_params_init_info_free(void)
{
	struct haccel_hostmem_params p;
	struct haccel_hostmem_info i;
	struct haccel_hostmem_stats s;

	memset(&p, 0xff, sizeof(p));
	haccel_hostmem_params_init(&p);
	KTAP_EXPECT_EQ(p.size, sizeof(p));
	KTAP_EXPECT_EQ(p.flags, 0);
	KTAP_EXPECT_EQ(p.node, HACCEL_NODE_ANY);
	KTAP_EXPECT_EQ(p.reserved, 0);
	KTAP_EXPECT_EQ(p.bytes, 0);
	haccel_hostmem_params_init(NULL);
	KTAP_EXPECT_EQ(haccel_hostmem_info(NULL, &i), -EINVAL);
	KTAP_EXPECT_EQ(haccel_hostmem_stats(NULL, &s), -EINVAL);
	haccel_hostmem_free(NULL);
}

static void expect_stats(struct haccel_ctx *ctx, uint64_t node0, uint64_t unplaced,
			 uint64_t unpinned, uint64_t buffers, int line)
{
	struct haccel_hostmem_stats s = hm_stats(ctx);

	if (s.bytes_pinned[0] != node0 || s.bytes_pinned_unplaced != unplaced ||
	    s.bytes_unpinned != unpinned || s.buffers != buffers)
		ktap_fail_at(__FILE__, line,
			     "stats node0 %llu unplaced %llu unpinned %llu buffers %llu, want %llu %llu %llu %llu",
			     (unsigned long long)s.bytes_pinned[0],
			     (unsigned long long)s.bytes_pinned_unplaced,
			     (unsigned long long)s.bytes_unpinned,
			     (unsigned long long)s.buffers, (unsigned long long)node0,
			     (unsigned long long)unplaced, (unsigned long long)unpinned,
			     (unsigned long long)buffers);
	for (int n = 1; n < HACCEL_MAX_NODES; n++)
		if (s.bytes_pinned[n])
			ktap_fail_at(__FILE__, line, "bytes_pinned[%d] is %llu", n,
				     (unsigned long long)s.bytes_pinned[n]);
	if (s.fallbacks_unpinned || s.fallbacks_unplaced)
		ktap_fail_at(__FILE__, line, "fallbacks counted without a fallback");
}

static void t_stats_add_subtract(void)
{
	struct haccel_hostmem *a, *b, *c, *d;
	uint64_t ma, mb, mc, md;
	struct haccel_ctx *ctx;

	need_lock(16 * MIB);
	unsetenv("HACCEL_SYSFS_ROOT");
	ctx = hm_ctx();
	expect_stats(ctx, 0, 0, 0, 0, __LINE__);
	a = alloc_ok(ctx, 1, 0, 0);
	ma = info_of(a).mapped_bytes;
	expect_stats(ctx, ma, 0, 0, 1, __LINE__);
	b = alloc_ok(ctx, 3 * MIB + 1, 0, HACCEL_NODE_ANY);
	mb = info_of(b).mapped_bytes;
	expect_stats(ctx, ma, mb, 0, 2, __LINE__);
	c = alloc_ok(ctx, 5 * MIB + 17, HACCEL_HOSTMEM_NO_HUGE, 0);
	mc = info_of(c).mapped_bytes;
	expect_stats(ctx, ma + mc, mb, 0, 3, __LINE__);
	/* Fallback flags that are not needed change nothing. */
	d = alloc_ok(ctx, 4097, HACCEL_HOSTMEM_ALLOW_UNPINNED | HACCEL_HOSTMEM_ALLOW_UNPLACED, 0);
	md = info_of(d).mapped_bytes;
	KTAP_EXPECT_EQ(info_of(d).pinned, 1);
	KTAP_EXPECT_EQ(info_of(d).node, 0);
	expect_stats(ctx, ma + mc + md, mb, 0, 4, __LINE__);
	haccel_hostmem_free(c);
	expect_stats(ctx, ma + md, mb, 0, 3, __LINE__);
	haccel_hostmem_free(a);
	expect_stats(ctx, md, mb, 0, 2, __LINE__);
	haccel_hostmem_free(b);
	expect_stats(ctx, md, 0, 0, 1, __LINE__);
	haccel_hostmem_free(d);
	expect_stats(ctx, 0, 0, 0, 0, __LINE__);
	KTAP_EXPECT_EQ(hm_warnings, 0);
	haccel_close(ctx);
}

static long long read_num(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void t_hugetlb(void)
{
	const char *pool = "/sys/kernel/mm/hugepages/hugepages-2048kB";
	struct haccel_hostmem_params p;
	struct haccel_hostmem *m = NULL;
	struct haccel_ctx *ctx;
	char path[256];
	long long fr, rsv;

	unsetenv("HACCEL_SYSFS_ROOT");
	snprintf(path, sizeof(path), "%s/free_hugepages", pool);
	fr = read_num(path);
	snprintf(path, sizeof(path), "%s/resv_hugepages", pool);
	rsv = read_num(path);
	if (fr < 0)
		ktap_skip("no 2 MiB huge page pool on this kernel");
	if (rsv > 0)
		fr -= rsv;
	ctx = hm_ctx();
	haccel_hostmem_params_init(&p);
	p.flags = HACCEL_HOSTMEM_HUGETLB;
	p.bytes = 2 * MIB + 1; /* two huge pages */
	if (fr < 2) {
		ktap_diag("%lld free 2 MiB huge pages: the refusal is checked", fr);
		expect_refused(ctx, &p, -ENOMEM, "too few 2 MiB huge pages: need 2,", __LINE__);
		HM_EXPECT_ERR(ctx, "nr_hugepages");
		/* On a node too: the message points at that node's pool. */
		p.node = 0;
		expect_refused(ctx, &p, -ENOMEM, "too few 2 MiB huge pages: need 2,", __LINE__);
		HM_EXPECT_ERR(ctx, "(node 0: ");
		HM_EXPECT_ERR(ctx, "node0/hugepages/hugepages-2048kB/nr_hugepages");
	} else {
		struct haccel_hostmem_info i;

		ktap_diag("%lld free 2 MiB huge pages: an allocation is checked", fr);
		need_lock(4 * MIB);
		KTAP_ASSERT_EQ(haccel_hostmem_alloc(ctx, &p, &m), 0);
		i = info_of(m);
		KTAP_EXPECT_EQ(i.huge, HACCEL_HUGE_HUGETLB);
		KTAP_EXPECT_EQ(i.page_size, 2 * MIB);
		KTAP_EXPECT_EQ(i.mapped_bytes, 4 * MIB);
		KTAP_EXPECT_EQ(i.bytes, 2 * MIB + 1);
		KTAP_EXPECT_EQ(i.pinned, 1);
		KTAP_EXPECT(vma_has_flag(i.ptr, "ht"));
		fill_and_check(&i);
		haccel_hostmem_free(m);
	}
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_sizes_exact),
	KTAP_CASE(t_thp_default),
	KTAP_CASE(t_no_huge),
	KTAP_CASE(t_node0_placement),
	KTAP_CASE(t_large_exact),
	KTAP_CASE(t_every_node),
	KTAP_CASE(t_node_any),
	KTAP_CASE(t_bad_params),
	KTAP_CASE(t_params_init_info_free),
	KTAP_CASE(t_stats_add_subtract),
	KTAP_CASE(t_hugetlb),
};

int main(int argc, char **argv)
{
	/* These cases are the userspace provider's (mlock, RLIMIT_MEMLOCK,
	 * VmFlags "lo"); where haccel.ko is loaded it would pin instead. */
	setenv("HACCEL_HOSTMEM_PROVIDER", "user", 1);
	return KTAP_MAIN(argc, argv, cases);
}
