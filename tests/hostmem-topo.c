// SPDX-License-Identifier: MIT
/* NUMA topology from sysfs: nodes, cpulists, meminfo, PCI device nodes, thread binding; fixture trees and the real /sys. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostmem-util.h"
#include "hostmem/hostmem.h"

static bool cpu_in(const struct haccel_numa_node *n, int c)
{
	return (n->cpus[c / 64] >> (c % 64)) & 1;
}

/* A fixture file of len bytes, NUL bytes included. */
static void put_bytes(const char *root, const char *rel, const void *data, size_t len)
{
	char path[512];
	FILE *f;

	hm_put(root, rel, ""); /* the directories */
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	KTAP_ASSERT(f != NULL);
	KTAP_ASSERT_EQ(fwrite(data, 1, len, f), len);
	KTAP_ASSERT_EQ(fclose(f), 0);
}

/* Two nodes as on a 2-socket GPU node, plus the files beside node dirs. */
static const char *two_node_fixture(void)
{
	const char *root = hm_fixture_new();

	hm_put_node(root, 0, "0-3,8,10-11\n", 1000, 600);
	hm_put_node(root, 1, "4-7\n", 2000, 1500);
	hm_put(root, "devices/system/node/online", "0-1\n");
	hm_put(root, "devices/system/node/possible", "0-1\n");
	hm_put(root, "devices/system/node/has_cpu", "0-1\n");
	hm_put(root, "devices/system/node/power/async", "disabled\n");
	/* Not node directories: ignored. */
	hm_put(root, "devices/system/node/nodeX/cpulist", "0\n");
	hm_put(root, "devices/system/node/node01/cpulist", "0\n");
	hm_put(root, "devices/system/cpu/online", "0-11\n");
	return root;
}

static void t_two_nodes(void)
{
	struct haccel_numa_node nodes[4];
	struct haccel_ctx *ctx;

	two_node_fixture();
	ctx = hm_ctx();
	memset(nodes, 0xa5, sizeof(nodes));
	KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, 4), 2);
	KTAP_EXPECT_EQ(nodes[0].id, 0);
	KTAP_EXPECT_EQ(nodes[0].n_cpus, 7);
	for (int c = 0; c < HACCEL_MAX_CPUS; c++)
		KTAP_EXPECT_EQ(cpu_in(&nodes[0], c),
			       (c <= 3 || c == 8 || c == 10 || c == 11));
	KTAP_EXPECT_EQ(nodes[0].mem_total, 1000ull * 1024);
	KTAP_EXPECT_EQ(nodes[0].mem_free, 600ull * 1024);
	KTAP_EXPECT_EQ(nodes[1].id, 1);
	KTAP_EXPECT_EQ(nodes[1].n_cpus, 4);
	for (int c = 0; c < HACCEL_MAX_CPUS; c++)
		KTAP_EXPECT_EQ(cpu_in(&nodes[1], c), (c >= 4 && c <= 7));
	KTAP_EXPECT_EQ(nodes[1].mem_total, 2000ull * 1024);
	KTAP_EXPECT_EQ(nodes[1].mem_free, 1500ull * 1024);

	/* The count is the number of nodes, whatever max is. */
	memset(nodes, 0xa5, sizeof(nodes));
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 1), 2);
	KTAP_EXPECT_EQ(nodes[0].id, 0);
	KTAP_EXPECT_EQ(nodes[1].id, (int32_t)0xa5a5a5a5); /* untouched */
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, NULL, 0), 2);
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, NULL, 1), -EINVAL);
	KTAP_EXPECT_EQ(haccel_numa_nodes(NULL, nodes, 4), -EINVAL);
	haccel_close(ctx);
}

static void t_sparse_ids_sorted(void)
{
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[4];
	struct haccel_ctx *ctx;

	hm_put_node(root, 10, "3\n", 64, 32);
	hm_put_node(root, 0, "0\n", 64, 32);
	hm_put_node(root, 2, "1-2\n", 64, 32);
	ctx = hm_ctx();
	KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, 4), 3);
	KTAP_EXPECT_EQ(nodes[0].id, 0);
	KTAP_EXPECT_EQ(nodes[1].id, 2);
	KTAP_EXPECT_EQ(nodes[2].id, 10);
	KTAP_EXPECT_EQ(nodes[1].n_cpus, 2);
	KTAP_EXPECT(cpu_in(&nodes[2], 3));
	haccel_close(ctx);
}

/* A memory-only node (CXL, HBM) has an empty cpulist; no meminfo is 0. */
static void t_memoryless_and_cpuless(void)
{
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[2];
	struct haccel_ctx *ctx;

	hm_put_node(root, 0, "0-1\n", 0, 0);
	hm_put_node(root, 1, "\n", 4096, 4000);
	ctx = hm_ctx();
	KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, 2), 2);
	KTAP_EXPECT_EQ(nodes[0].n_cpus, 2);
	KTAP_EXPECT_EQ(nodes[0].mem_total, 0);
	KTAP_EXPECT_EQ(nodes[0].mem_free, 0);
	KTAP_EXPECT_EQ(nodes[1].n_cpus, 0);
	KTAP_EXPECT_EQ(nodes[1].cpus[0], 0);
	KTAP_EXPECT_EQ(nodes[1].mem_total, 4096ull * 1024);
	/* A thread cannot run on a node without CPUs. */
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 1), -ENODEV);
	HM_EXPECT_ERR(ctx, "no CPUs");
	haccel_close(ctx);
}

static void t_malformed_cpulist(void)
{
	static const struct {
		const char *text;
		int status;
		const char *why;
	} bad[] = {
		{ "0-3,\n", -EBADMSG, "unexpected '\\n' at column 5" },
		{ "0-3,", -EBADMSG, "unexpected end" },
		{ "3-1\n", -EBADMSG, "reversed range 3-1" },
		{ "0,,1\n", -EBADMSG, "unexpected ','" },
		{ " 0-3\n", -EBADMSG, "unexpected ' '" },
		{ "0-3 \n", -EBADMSG, "unexpected ' '" },
		{ "0-3\n\n", -EBADMSG, "unexpected '\\n'" },
		{ "a\n", -EBADMSG, "unexpected 'a'" },
		{ "-1\n", -EBADMSG, "unexpected '-'" },
		{ "0-\n", -EBADMSG, "unexpected '\\n'" },
		{ "0-7:2/4\n", -EBADMSG, "unexpected ':'" },
		{ "5,5\n", -EBADMSG, "CPU 5 listed twice" },
		{ "0-3,2\n", -EBADMSG, "CPU 2 listed twice" },
		{ "1024\n", -ERANGE, "HACCEL_MAX_CPUS" },
		/* However many digits: named, not "unexpected" at a column. */
		{ "99999999999\n", -ERANGE, "CPU 99999999999 is beyond the 1024 CPUs" },
		{ "0-1000001\n", -ERANGE, "CPU 1000001 is beyond the 1024 CPUs" },
		{ "0,99999999\n", -ERANGE, "CPU 99999999 is beyond" },
		{ "2048-4096\n", -ERANGE, "CPU 2048 is beyond" },
		{ "0-1023,1024\n", -ERANGE, "CPU 1024 is beyond" },
		{ "123456789012345678901234567890\n", -ERANGE,
		  "CPU 123456789012345678901234... is beyond" },
		{ "\n\n", -EBADMSG, "unexpected" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *root = hm_fixture_new();
		struct haccel_numa_node nodes[2];
		struct haccel_ctx *ctx;
		int ret;

		hm_put_node(root, 0, "0\n", 64, 32);
		hm_put_node(root, 1, bad[i].text, 64, 32);
		ctx = hm_ctx();
		ret = haccel_numa_nodes(ctx, nodes, 2);
		if (ret != bad[i].status)
			ktap_fail_at(__FILE__, __LINE__, "cpulist \"%s\": %d, want %d",
				     bad[i].text, ret, bad[i].status);
		HM_EXPECT_ERR(ctx, "node1/cpulist");
		HM_EXPECT_ERR(ctx, bad[i].why);
		/* The flat fallback reads cpu/online with the same parser. */
		haccel_close(ctx);
	}
}

/* sysfs files are length-delimited: a NUL byte is content, and wrong. */
static void t_nul_bytes(void)
{
	static const char cpulist[] = "0\0,5-9 junk\n";
	static const char numa_node[] = "0\0junk\n";
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[2];
	struct haccel_ctx *ctx;
	int node = 99;

	hm_put_node(root, 0, "0\n", 64, 32);
	put_bytes(root, "devices/system/node/node1/cpulist", cpulist, sizeof(cpulist) - 1);
	put_bytes(root, "bus/pci/devices/0000:3b:00.0/numa_node", numa_node,
		  sizeof(numa_node) - 1);
	put_bytes(root, "bus/pci/devices/0000:3c:00.0/numa_node", "1\0", 2);
	ctx = hm_ctx();
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -EBADMSG);
	HM_EXPECT_ERR(ctx, "node1/cpulist: unexpected 0x00 at column 2");
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "3b:00.0", &node), -EBADMSG);
	HM_EXPECT_ERR(ctx, "not a node number");
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "3c:00.0", &node), -EBADMSG);
	KTAP_EXPECT_EQ(node, 99);

	/* The flat node's cpu/online too. */
	root = hm_fixture_new();
	put_bytes(root, "devices/system/cpu/online", cpulist, sizeof(cpulist) - 1);
	haccel_close(ctx);
	ctx = hm_ctx();
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -EBADMSG);
	HM_EXPECT_ERR(ctx, "cpu/online: unexpected 0x00 at column 2");
	haccel_close(ctx);
}

/* Files fill the read buffer (8192 bytes) exactly up to its last byte. */
static void t_file_fills_buffer(void)
{
	enum { TEXT_MAX = 8191 };
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[1];
	struct haccel_ctx *ctx;
	char text[TEXT_MAX + 2];
	int n;

	hm_put(root, "devices/system/node/node0/cpulist", "0\n");
	/* A meminfo of exactly TEXT_MAX bytes: read whole, not "too long". */
	n = snprintf(text, sizeof(text),
		     "Node 0 MemTotal:       1000 kB\nNode 0 MemFree:        600 kB\n");
	memset(text + n, 'x', TEXT_MAX - n - 1);
	text[TEXT_MAX - 1] = '\n';
	put_bytes(root, "devices/system/node/node0/meminfo", text, TEXT_MAX);
	ctx = hm_ctx();
	KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, 1), 1);
	KTAP_EXPECT_EQ(nodes[0].mem_total, 1000ull * 1024);
	KTAP_EXPECT_EQ(nodes[0].mem_free, 600ull * 1024);

	/* One byte more does not fit. */
	text[TEXT_MAX - 1] = 'x';
	text[TEXT_MAX] = '\n';
	put_bytes(root, "devices/system/node/node0/meminfo", text, TEXT_MAX + 1);
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 1), -EBADMSG);
	HM_EXPECT_ERR(ctx, "node0/meminfo is longer than 8191 bytes");
	haccel_close(ctx);
}

static void t_malformed_meminfo(void)
{
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[2];
	struct haccel_ctx *ctx;

	hm_put(root, "devices/system/node/node0/cpulist", "0\n");
	hm_put(root, "devices/system/node/node0/meminfo",
	       "Node 0 MemTotal:       lots kB\nNode 0 MemFree: 1 kB\n");
	ctx = hm_ctx();
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 1), -EBADMSG);
	HM_EXPECT_ERR(ctx, "node0/meminfo");
	HM_EXPECT_ERR(ctx, "MemTotal");
	hm_put(root, "devices/system/node/node0/meminfo",
	       "Node 0 MemTotal:       12 MB\n");
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 1), -EBADMSG);
	/* A missing cpulist in a node directory is a broken tree. */
	hm_put(root, "devices/system/node/node1/meminfo", "Node 1 MemTotal: 1 kB\n");
	hm_put(root, "devices/system/node/node0/meminfo", "Node 0 MemTotal: 1 kB\n");
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, NULL, 0), 2);
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 1), 2);
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -ENOENT);
	HM_EXPECT_ERR(ctx, "node1/cpulist");
	haccel_close(ctx);
}

/* A kernel without NUMA has no devices/system/node: one node 0, all CPUs. */
static void t_no_node_directory(void)
{
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[2];
	struct haccel_ctx *ctx;
	char path[256];

	hm_put(root, "devices/system/cpu/online", "0-5\n");
	ctx = hm_ctx();
	memset(nodes, 0xa5, sizeof(nodes));
	KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, 2), 1);
	KTAP_EXPECT_EQ(nodes[0].id, 0);
	KTAP_EXPECT_EQ(nodes[0].n_cpus, 6);
	KTAP_EXPECT_EQ(nodes[0].cpus[0], 0x3f);
	KTAP_EXPECT_EQ(nodes[0].mem_total, 0);
	KTAP_EXPECT_EQ(nodes[0].mem_free, 0);
	KTAP_EXPECT_EQ(nodes[1].id, (int32_t)0xa5a5a5a5);
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, NULL, 0), 1);
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 1), -ENODEV);

	/* Malformed online list: same strict parser. */
	hm_put(root, "devices/system/cpu/online", "0-5,\n");
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -EBADMSG);
	HM_EXPECT_ERR(ctx, "cpu/online");

	/* Neither: no sysfs at all is an error, not a made-up node. */
	snprintf(path, sizeof(path), "%s/devices/system/cpu/online", root);
	KTAP_ASSERT_EQ(remove(path), 0);
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -ENOENT);
	HM_EXPECT_ERR(ctx, "is sysfs mounted");
	KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, NULL, 0), -ENOENT);
	haccel_close(ctx);
}

/*
 * Node ids stop at 1023 (NODES_SHIFT <= 10): a directory beyond is refused,
 * neither skipped nor replaced by the flat node 0.
 */
static void t_node_id_out_of_range(void)
{
	static const char *const names[] = {
		"node1024", "node99999", "node99999999999999999999999",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *root = hm_fixture_new();
		struct haccel_numa_node nodes[2];
		struct haccel_ctx *ctx;
		char rel[128];

		hm_put_node(root, 5, "0\n", 64, 32);
		snprintf(rel, sizeof(rel), "devices/system/node/%s/cpulist", names[i]);
		hm_put(root, rel, "1\n");
		ctx = hm_ctx();
		KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -ERANGE);
		HM_EXPECT_ERR(ctx, names[i]);
		HM_EXPECT_ERR(ctx, "beyond the 1024 node ids");
		KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, NULL, 0), -ERANGE);
		haccel_close(ctx);
	}

	/* Alone beside cpu/online: still no made-up node 0. */
	{
		const char *root = hm_fixture_new();
		struct haccel_numa_node nodes[2];
		struct haccel_ctx *ctx;

		hm_put(root, "devices/system/node/node1024/cpulist", "0\n");
		hm_put(root, "devices/system/cpu/online", "0\n");
		ctx = hm_ctx();
		KTAP_EXPECT_EQ(haccel_numa_nodes(ctx, nodes, 2), -ERANGE);
		HM_EXPECT_ERR(ctx, "node1024");
		KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 0), -ERANGE);
		haccel_close(ctx);
	}
}

static void pci_fixture(const char *root)
{
	hm_put(root, "bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
	hm_put(root, "bus/pci/devices/0000:86:00.0/numa_node", "-1\n");
	hm_put(root, "bus/pci/devices/10000:01:1f.7/numa_node", "0\n");
	hm_put(root, "bus/pci/devices/0000:af:00.0/numa_node", "one\n");
	hm_put(root, "bus/pci/devices/0000:b0:00.0/numa_node", "-2\n");
	hm_put(root, "bus/pci/devices/0000:b1:00.0/numa_node", "1 2\n");
	/* Not what the kernel writes: an optional '-', digits, one newline. */
	hm_put(root, "bus/pci/devices/0000:c0:00.0/numa_node", " +0\n");
	hm_put(root, "bus/pci/devices/0000:c1:00.0/numa_node", "+1\n");
	hm_put(root, "bus/pci/devices/0000:c2:00.0/numa_node", " 1\n");
	hm_put(root, "bus/pci/devices/0000:c3:00.0/numa_node", "1\n\n");
	hm_put(root, "bus/pci/devices/0000:c4:00.0/numa_node", "\n");
	hm_put(root, "bus/pci/devices/0000:c5:00.0/numa_node", "");
	hm_put(root, "bus/pci/devices/0000:c6:00.0/numa_node", "-\n");
	hm_put(root, "bus/pci/devices/0000:c7:00.0/numa_node", "0x1\n");
	hm_put(root, "bus/pci/devices/0000:c8:00.0/numa_node", "1024\n");
	hm_put(root, "bus/pci/devices/0000:c9:00.0/numa_node", "99999999999999999999\n");
	hm_put(root, "bus/pci/devices/0000:ca:00.0/numa_node", "\t1\n");
	hm_put(root, "bus/pci/devices/0000:cb:00.0/numa_node", "1023");
}

static void t_pci_numa_node(void)
{
	static const struct {
		const char *id;
		int node;
	} good[] = {
		{ "0000:3b:00.0", 1 },  { "0000:3B:00.0", 1 },
		{ "3b:00.0", 1 },       { "3B:00.0", 1 },
		{ "00000000:3B:00.0", 1 }, /* NVML writes 8 domain digits */
		{ "0:3b:00.0", 1 },     { "0000:86:00.0", -1 },
		{ "86:00.0", -1 },      { "10000:01:1F.7", 0 }, /* VMD domain */
	};
	struct haccel_ctx *ctx;

	pci_fixture(hm_fixture_new());
	ctx = hm_ctx();
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int node = 99, ret = haccel_numa_node_of_pci(ctx, good[i].id, &node);

		if (ret || node != good[i].node)
			ktap_fail_at(__FILE__, __LINE__, "%s: ret %d node %d, want 0 and %d (%s)",
				     good[i].id, ret, node, good[i].node, hm_err(ctx));
	}
	haccel_close(ctx);
}

static void t_pci_missing_device(void)
{
	struct haccel_ctx *ctx;
	int node = 99;

	pci_fixture(hm_fixture_new());
	ctx = hm_ctx();
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "0000:3c:00.0", &node), -ENOENT);
	KTAP_EXPECT_EQ(node, 99);
	HM_EXPECT_ERR(ctx, "no PCI device 0000:3c:00.0");
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "3B:00.1", &node), -ENOENT);
	HM_EXPECT_ERR(ctx, "0000:3b:00.1"); /* the normalised name */
	KTAP_EXPECT_EQ(node, 99);
	haccel_close(ctx);
}

static void t_pci_malformed(void)
{
	static const char *const bad[] = {
		"", "3b", "3b:00", "3b:00.", "3b:00.8", "3b:20.0", "3b:1f.9",
		"0000:3b:00.0 ", " 0000:3b:00.0", "0000:3b:00.0\n", "g0:00.0",
		"0000:3b:00:0", "000000000:3b:00.0", "3b:0.0", "3b:000.0",
		"3:00.0", "3bb:00.0", ":3b:00.0", "0000::3b:00.0",
		"0000:3b:00.00", "0x00:3b:00.0", "-000:3b:00.0", "0000:3b.00.0",
		"0000:0000:3b:00.0", "0000:3b:00.0/../..",
	};
	struct haccel_ctx *ctx;
	int node = 99;

	pci_fixture(hm_fixture_new());
	ctx = hm_ctx();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = haccel_numa_node_of_pci(ctx, bad[i], &node);

		if (ret != -EINVAL)
			ktap_fail_at(__FILE__, __LINE__, "\"%s\": %d, want -EINVAL", bad[i], ret);
		HM_EXPECT_ERR(ctx, "malformed PCI bus id");
	}
	KTAP_EXPECT_EQ(node, 99);
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, NULL, &node), -EINVAL);
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "3b:00.0", NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(NULL, "3b:00.0", &node), -EINVAL);

	/* A numa_node file that is not a node number is malformed sysfs. */
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "af:00.0", &node), -EBADMSG);
	HM_EXPECT_ERR(ctx, "not a node number");
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "b0:00.0", &node), -EBADMSG);
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "b1:00.0", &node), -EBADMSG);
	for (unsigned int bus = 0xc0; bus <= 0xca; bus++) {
		char id[16];
		int ret;

		snprintf(id, sizeof(id), "%02x:00.0", bus);
		ret = haccel_numa_node_of_pci(ctx, id, &node);
		if (ret != -EBADMSG)
			ktap_fail_at(__FILE__, __LINE__, "%s: %d, want -EBADMSG", id, ret);
		HM_EXPECT_ERR(ctx, "not a node number");
	}
	KTAP_EXPECT_EQ(node, 99);
	/* No newline at all is fine, and 1023 is the last node id. */
	KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, "cb:00.0", &node), 0);
	KTAP_EXPECT_EQ(node, 1023);
	haccel_close(ctx);
}

/* Two CPUs this thread may run on, or a skip. */
static void two_cpus(int *a, int *b)
{
	cpu_set_t set;

	*a = *b = -1;
	KTAP_ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int c = 0; c < CPU_SETSIZE && c < HACCEL_MAX_CPUS; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		if (*a < 0)
			*a = c;
		else if (*b < 0)
			*b = c;
	}
	if (*b < 0)
		ktap_skip("this process may run on fewer than 2 CPUs");
}

static void expect_affinity_only(int cpu)
{
	cpu_set_t set;

	KTAP_ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
	KTAP_EXPECT_EQ(CPU_COUNT(&set), 1);
	KTAP_EXPECT(CPU_ISSET(cpu, &set));
}

/*
 * devices/system/node with no node<N> directory (only online, possible...)
 * is a machine without NUMA too: haccel_numa_nodes() reports node 0 with
 * the online CPUs, and binding to that node 0 binds to them.
 */
static void t_bind_thread_flat_node(void)
{
	const char *root = hm_fixture_new();
	struct haccel_numa_node nodes[2];
	struct haccel_ctx *ctx;
	char list[32], path[512];
	cpu_set_t set;
	int a, b;

	two_cpus(&a, &b);
	snprintf(list, sizeof(list), "%d,%d\n", a, b);
	hm_put(root, "devices/system/cpu/online", list);
	hm_put(root, "devices/system/node/online", "0\n");
	hm_put(root, "devices/system/node/possible", "0\n");
	hm_put(root, "devices/system/node/power/async", "disabled\n");
	ctx = hm_ctx();
	for (int pass = 0; pass < 2; pass++) {
		/* Pass 0: node/ without node dirs; pass 1: no node/ at all. */
		KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, 2), 1);
		KTAP_EXPECT_EQ(nodes[0].id, 0);
		KTAP_EXPECT_EQ(nodes[0].n_cpus, 2);
		KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 0), 0);
		KTAP_ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
		KTAP_EXPECT_EQ(CPU_COUNT(&set), 2);
		KTAP_EXPECT(CPU_ISSET(a, &set) && CPU_ISSET(b, &set));
		KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 1), -ENODEV);
		HM_EXPECT_ERR(ctx, "no node 1");
		if (pass == 0) {
			snprintf(path, sizeof(path), "%s/devices/system/node", root);
			KTAP_ASSERT_EQ(test_rmtree(path), 0);
		}
	}
	haccel_close(ctx);
}

static void t_bind_thread_fixture(void)
{
	const char *root = hm_fixture_new();
	struct haccel_ctx *ctx;
	char list[32];
	cpu_set_t before, after;
	int a, b;

	two_cpus(&a, &b);
	snprintf(list, sizeof(list), "%d\n", a);
	hm_put_node(root, 0, list, 64, 32);
	snprintf(list, sizeof(list), "%d\n", b);
	hm_put_node(root, 1, list, 64, 32);
	hm_put_node(root, 2, "1000-1001\n", 64, 32); /* CPUs this machine lacks */
	ctx = hm_ctx();

	KTAP_ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, HACCEL_NODE_ANY), 0);
	KTAP_ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
	KTAP_EXPECT(CPU_EQUAL(&before, &after));

	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 1), 0);
	expect_affinity_only(b);
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 0), 0);
	expect_affinity_only(a);

	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 3), -ENODEV);
	HM_EXPECT_ERR(ctx, "no node 3");
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, -2), -ENODEV);
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 5000), -ENODEV);
	KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, 2), -EINVAL);
	HM_EXPECT_ERR(ctx, "node 2's 2 CPUs");
	expect_affinity_only(a); /* a failed bind changes nothing */
	haccel_close(ctx);
}

/* The machine's own /sys (no $HACCEL_SYSFS_ROOT). */
static void t_real_sysfs(void)
{
	struct haccel_numa_node *nodes;
	struct haccel_ctx *ctx;
	long onln = sysconf(_SC_NPROCESSORS_ONLN), conf = sysconf(_SC_NPROCESSORS_CONF);
	uint32_t cpus = 0;
	int n, checked = 0;
	struct dirent *d;
	DIR *dir;

	unsetenv("HACCEL_SYSFS_ROOT");
	ctx = hm_ctx();
	n = haccel_numa_nodes(ctx, NULL, 0);
	KTAP_ASSERT(n >= 1);
	nodes = calloc((size_t)n, sizeof(*nodes));
	KTAP_ASSERT(nodes);
	KTAP_ASSERT_EQ(haccel_numa_nodes(ctx, nodes, (uint32_t)n), n);
	for (int i = 0; i < n; i++) {
		ktap_diag("node %d: %u CPUs, %llu of %llu bytes free", nodes[i].id,
			  nodes[i].n_cpus, (unsigned long long)nodes[i].mem_free,
			  (unsigned long long)nodes[i].mem_total);
		cpus += nodes[i].n_cpus;
		if (i)
			KTAP_EXPECT(nodes[i].id > nodes[i - 1].id);
	}
	/* Node cpulists may keep offline CPUs: either count will do. */
	if (cpus != (uint32_t)onln && cpus != (uint32_t)conf)
		ktap_fail_at(__FILE__, __LINE__, "nodes hold %u CPUs, sysconf says %ld online, %ld configured",
			     cpus, onln, conf);

	/* Every PCI device maps to -1 or a node that exists. */
	dir = opendir("/sys/bus/pci/devices");
	while (dir && (d = readdir(dir))) {
		int node = 99, found = 0;

		if (d->d_name[0] == '.')
			continue;
		KTAP_EXPECT_EQ(haccel_numa_node_of_pci(ctx, d->d_name, &node), 0);
		for (int i = 0; i < n; i++)
			found |= nodes[i].id == node;
		if (node != -1 && !found)
			ktap_fail_at(__FILE__, __LINE__, "%s on node %d, not in the node list",
				     d->d_name, node);
		checked++;
	}
	if (dir)
		closedir(dir);
	ktap_diag("%d PCI devices checked", checked);

	/* Binding to the first node leaves exactly its online CPUs. */
	if (nodes[0].n_cpus) {
		cpu_set_t set;

		KTAP_EXPECT_EQ(haccel__numa_bind_thread(ctx, nodes[0].id), 0);
		KTAP_ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				KTAP_EXPECT(cpu_in(&nodes[0], c));
	}
	free(nodes);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_two_nodes),
	KTAP_CASE(t_sparse_ids_sorted),
	KTAP_CASE(t_memoryless_and_cpuless),
	KTAP_CASE(t_malformed_cpulist),
	KTAP_CASE(t_nul_bytes),
	KTAP_CASE(t_file_fills_buffer),
	KTAP_CASE(t_malformed_meminfo),
	KTAP_CASE(t_no_node_directory),
	KTAP_CASE(t_node_id_out_of_range),
	KTAP_CASE(t_pci_numa_node),
	KTAP_CASE(t_pci_missing_device),
	KTAP_CASE(t_pci_malformed),
	KTAP_CASE(t_bind_thread_flat_node),
	KTAP_CASE(t_bind_thread_fixture),
	KTAP_CASE(t_real_sysfs),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
