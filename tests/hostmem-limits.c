// SPDX-License-Identifier: MIT
/* Pinned host memory at its limits: RLIMIT_MEMLOCK refusals and their message, unpinned and unplaced fallbacks, a node the kernel lacks. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostmem-util.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)

/*
 * Make this (forked) process subject to RLIMIT_MEMLOCK: lower the limit,
 * then drop CAP_IPC_LOCK, the only thing that lets root ignore it. capset
 * keeps the uid, so the process stays dumpable and LeakSanitizer can still
 * stop it at exit (a setresuid to nobody would not).
 */
static void memlock_limit(rlim_t bytes)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	struct rlimit rl = { bytes, bytes };
	const uint32_t bit = 1u << CAP_IPC_LOCK;

	KTAP_ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	if (!hm_has_cap(CAP_IPC_LOCK))
		return;
	memset(d, 0, sizeof(d));
	KTAP_ASSERT_EQ(syscall(SYS_capget, &h, d), 0);
	d[0].effective &= ~bit;
	d[0].permitted &= ~bit;
	d[0].inheritable &= ~bit;
	if (syscall(SYS_capset, &h, d))
		ktap_skip("cannot drop CAP_IPC_LOCK (capset: %s), so RLIMIT_MEMLOCK cannot be tested",
			  strerror(errno));
	KTAP_ASSERT(!hm_has_cap(CAP_IPC_LOCK));
}

/* Nothing may be locked already, or the arithmetic below is off. */
static void need_nothing_locked(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	KTAP_ASSERT(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmLck:", 6) && strtoull(line + 6, NULL, 10) != 0) {
			fclose(f);
			ktap_skip("this process has memory locked already: %s", line);
		}
	fclose(f);
}

static int alloc(struct haccel_ctx *ctx, uint64_t bytes, uint32_t flags, int node,
		 struct haccel_hostmem **m)
{
	struct haccel_hostmem_params p;

	haccel_hostmem_params_init(&p);
	p.bytes = bytes;
	p.flags = flags;
	p.node = node;
	*m = NULL;
	return haccel_hostmem_alloc(ctx, &p, m);
}

static struct haccel_hostmem_info info_of(const struct haccel_hostmem *m)
{
	struct haccel_hostmem_info i;

	KTAP_ASSERT_EQ(haccel_hostmem_info(m, &i), 0);
	return i;
}

static void t_memlock_refused(void)
{
	struct haccel_hostmem_stats before, after;
	struct haccel_hostmem *small, *m;
	struct haccel_ctx *ctx;

	need_nothing_locked();
	memlock_limit(64 * KIB);
	ctx = hm_ctx();

	/* Within the limit, locking still works: the limit is what refuses. */
	KTAP_ASSERT_EQ(alloc(ctx, 4 * KIB, 0, HACCEL_NODE_ANY, &small), 0);
	KTAP_EXPECT_EQ(info_of(small).pinned, 1);

	before = hm_stats(ctx);
	KTAP_EXPECT_EQ(alloc(ctx, MIB, 0, HACCEL_NODE_ANY, &m), -EPERM);
	KTAP_EXPECT(m == NULL);
	HM_EXPECT_ERR(ctx, "cannot lock 1048576 bytes");
	HM_EXPECT_ERR(ctx, "RLIMIT_MEMLOCK soft limit is 65536 bytes (hard 65536)");
	HM_EXPECT_ERR(ctx, "already has 4096 bytes locked (VmLck)");
	HM_EXPECT_ERR(ctx, "needs 1048576 more and has no CAP_IPC_LOCK");
	HM_EXPECT_ERR(ctx, "ulimit -l");
	HM_EXPECT_ERR(ctx, "LimitMEMLOCK=");
	HM_EXPECT_ERR(ctx, "run with CAP_IPC_LOCK");
	after = hm_stats(ctx);
	HM_EXPECT_STATS_EQ(before, after);
	KTAP_EXPECT_EQ(after.buffers, 1);
	KTAP_EXPECT_EQ(hm_warnings, 0);

	/* Nothing of the refused buffer stayed locked: 60 of the 64 KiB fit. */
	haccel_hostmem_free(small);
	KTAP_ASSERT_EQ(alloc(ctx, 60 * KIB, 0, HACCEL_NODE_ANY, &small), 0);
	haccel_hostmem_free(small);
	KTAP_EXPECT_EQ(hm_stats(ctx).buffers, 0);
	haccel_close(ctx);
}

/* A limit of 0: the kernel says EPERM rather than ENOMEM; same status. */
static void t_memlock_zero(void)
{
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;

	need_nothing_locked();
	memlock_limit(0);
	ctx = hm_ctx();
	KTAP_EXPECT_EQ(alloc(ctx, 4 * KIB, 0, HACCEL_NODE_ANY, &m), -EPERM);
	HM_EXPECT_ERR(ctx, "RLIMIT_MEMLOCK soft limit is 0 bytes");
	HM_EXPECT_ERR(ctx, "ulimit -l");
	KTAP_EXPECT_EQ(hm_stats(ctx).buffers, 0);
	haccel_close(ctx);
}

static void t_allow_unpinned(void)
{
	struct haccel_hostmem_stats s;
	struct haccel_hostmem_info i;
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;

	need_nothing_locked();
	memlock_limit(64 * KIB);
	ctx = hm_ctx();
	KTAP_ASSERT_EQ(alloc(ctx, MIB, HACCEL_HOSTMEM_ALLOW_UNPINNED, HACCEL_NODE_ANY, &m), 0);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.pinned, 0);
	KTAP_EXPECT_EQ(i.bytes, MIB);
	memset(i.ptr, 0x5a, (size_t)i.bytes);
	s = hm_stats(ctx);
	KTAP_EXPECT_EQ(s.fallbacks_unpinned, 1);
	KTAP_EXPECT_EQ(s.bytes_unpinned, i.mapped_bytes);
	KTAP_EXPECT_EQ(s.bytes_pinned_unplaced, 0);
	KTAP_EXPECT_EQ(s.buffers, 1);
	KTAP_EXPECT_EQ(s.fallbacks_unplaced, 0);
	/* One warning, saying why and which flag allowed it. */
	KTAP_EXPECT_EQ(hm_warnings, 1);
	KTAP_EXPECT(strstr(hm_last_warning, "RLIMIT_MEMLOCK") != NULL);
	KTAP_EXPECT(strstr(hm_last_warning, "HACCEL_HOSTMEM_ALLOW_UNPINNED") != NULL);
	KTAP_EXPECT_EQ(hm_errors, 0);

	haccel_hostmem_free(m);
	s = hm_stats(ctx);
	KTAP_EXPECT_EQ(s.bytes_unpinned, 0);
	KTAP_EXPECT_EQ(s.buffers, 0);
	KTAP_EXPECT_EQ(s.fallbacks_unpinned, 1); /* "ever" */
	haccel_close(ctx);
}

/*
 * A fixture tree with node 0 and a node id the kernel does not have: the
 * library believes sysfs, the kernel refuses the binding.
 */
static int fake_node_fixture(void)
{
	const char *root;
	char path[64];
	int fake = 1;

	for (; fake < 64; fake++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", fake);
		if (access(path, F_OK) != 0)
			break;
	}
	root = hm_fixture_new();
	hm_put_node(root, 0, "0\n", 1024 * 1024, 512 * 1024);
	hm_put_node(root, fake, "1\n", 1024 * 1024, 512 * 1024);
	return fake;
}

static void t_mbind_fake_node(void)
{
	struct haccel_hostmem_stats before, after;
	struct haccel_hostmem_info i;
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;
	char needle[64];
	int fake = fake_node_fixture(), mode = -1;

	ctx = hm_ctx();
	before = hm_stats(ctx);
	KTAP_EXPECT_EQ(alloc(ctx, MIB, 0, fake, &m), -ENODEV);
	KTAP_EXPECT(m == NULL);
	snprintf(needle, sizeof(needle), "cannot bind 1048576 bytes to node %d (mbind: ", fake);
	HM_EXPECT_ERR(ctx, needle);
	HM_EXPECT_ERR(ctx, "HACCEL_HOSTMEM_ALLOW_UNPLACED");
	after = hm_stats(ctx);
	HM_EXPECT_STATS_EQ(before, after);

	/* The fixture's node 0 is the kernel's node 0: that one binds. */
	KTAP_ASSERT_EQ(alloc(ctx, MIB, HACCEL_HOSTMEM_ALLOW_UNPINNED, 0, &m), 0);
	KTAP_EXPECT_EQ(info_of(m).node, 0);
	haccel_hostmem_free(m);

	KTAP_ASSERT_EQ(alloc(ctx, MIB, HACCEL_HOSTMEM_ALLOW_UNPLACED |
					HACCEL_HOSTMEM_ALLOW_UNPINNED, fake, &m), 0);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.node, -1);
	KTAP_ASSERT_EQ(get_mempolicy(&mode, NULL, 0, i.ptr, MPOL_F_ADDR), 0);
	KTAP_EXPECT_EQ(mode, MPOL_DEFAULT);
	memset(i.ptr, 1, (size_t)i.bytes);
	after = hm_stats(ctx);
	KTAP_EXPECT_EQ(after.fallbacks_unplaced, 1);
	KTAP_EXPECT_EQ(after.bytes_pinned[fake], 0);
	if (i.pinned)
		KTAP_EXPECT_EQ(after.bytes_pinned_unplaced, i.mapped_bytes);
	else
		KTAP_EXPECT_EQ(after.bytes_unpinned, i.mapped_bytes);
	KTAP_EXPECT_EQ(after.buffers, 1);
	KTAP_EXPECT(hm_warnings >= 1);
	KTAP_EXPECT(strstr(hm_last_warning, "continuing unplaced") != NULL ||
		    strstr(hm_last_warning, "continuing unpinned") != NULL);
	haccel_hostmem_free(m);
	after = hm_stats(ctx);
	KTAP_EXPECT_EQ(after.bytes_pinned_unplaced + after.bytes_unpinned, 0);
	KTAP_EXPECT_EQ(after.buffers, 0);
	haccel_close(ctx);
}

/* Both limits at once: unplaced and unpinned, each counted, two warnings. */
static void t_both_fallbacks(void)
{
	struct haccel_hostmem_stats s;
	struct haccel_hostmem_info i;
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;
	int fake;

	need_nothing_locked();
	memlock_limit(64 * KIB);
	fake = fake_node_fixture();
	ctx = hm_ctx();
	KTAP_ASSERT_EQ(alloc(ctx, 3 * MIB + 1, HACCEL_HOSTMEM_ALLOW_UNPLACED |
					       HACCEL_HOSTMEM_ALLOW_UNPINNED, fake, &m), 0);
	i = info_of(m);
	KTAP_EXPECT_EQ(i.node, -1);
	KTAP_EXPECT_EQ(i.pinned, 0);
	s = hm_stats(ctx);
	KTAP_EXPECT_EQ(s.fallbacks_unplaced, 1);
	KTAP_EXPECT_EQ(s.fallbacks_unpinned, 1);
	KTAP_EXPECT_EQ(s.bytes_unpinned, i.mapped_bytes);
	KTAP_EXPECT_EQ(s.bytes_pinned_unplaced, 0);
	KTAP_EXPECT_EQ(s.bytes_pinned[fake], 0);
	KTAP_EXPECT_EQ(hm_warnings, 2);
	KTAP_EXPECT_EQ(hm_errors, 0);
	haccel_hostmem_free(m);
	s = hm_stats(ctx);
	KTAP_EXPECT_EQ(s.bytes_unpinned, 0);
	KTAP_EXPECT_EQ(s.buffers, 0);
	haccel_close(ctx);
}

/* The address space refused (RLIMIT_AS): -ENOMEM from the mapping step. */
static void t_map_refused(void)
{
	struct haccel_hostmem_stats before, after;
	unsigned long long vm_kb = 0;
	struct haccel_hostmem *m;
	struct haccel_ctx *ctx;
	struct rlimit rl;
	char line[256];
	FILE *f;

	ctx = hm_ctx();
	before = hm_stats(ctx);
	f = fopen("/proc/self/status", "r");
	KTAP_ASSERT(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmSize:", 7))
			vm_kb = strtoull(line + 7, NULL, 10);
	fclose(f);
	KTAP_ASSERT(vm_kb > 0);
	/* Room for small allocations of the runtime, not for 1 GiB. */
	rl.rlim_cur = rl.rlim_max = (vm_kb << 10) + 64 * MIB;
	KTAP_ASSERT_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	KTAP_EXPECT_EQ(alloc(ctx, 1ull << 30, HACCEL_HOSTMEM_ALLOW_UNPINNED |
				    HACCEL_HOSTMEM_ALLOW_UNPLACED, HACCEL_NODE_ANY, &m), -ENOMEM);
	KTAP_EXPECT(m == NULL);
	HM_EXPECT_ERR(ctx, "cannot map 1073741824 bytes (mmap: ");
	HM_EXPECT_ERR(ctx, "ulimit -v");
	after = hm_stats(ctx);
	HM_EXPECT_STATS_EQ(before, after);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_memlock_refused),
	KTAP_CASE(t_memlock_zero),
	KTAP_CASE(t_allow_unpinned),
	KTAP_CASE(t_mbind_fake_node),
	KTAP_CASE(t_both_fallbacks),
	KTAP_CASE(t_map_refused),
};

int main(int argc, char **argv)
{
	/* These cases are the userspace provider's (mlock, RLIMIT_MEMLOCK,
	 * VmFlags "lo"); where haccel.ko is loaded it would pin instead. */
	setenv("HACCEL_HOSTMEM_PROVIDER", "user", 1);
	return KTAP_MAIN(argc, argv, cases);
}
