// SPDX-License-Identifier: MIT
/* Module unload: refused while a file, a dma-buf or a mapping keeps buffers alive; no object leaks on any client path; after cleanup it succeeds, leaves nothing, and reloads clean. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver-util.h"

#define SIZE (64u << 10)

static const char *module_path(void)
{
	return hd_module_path();
}

static int unload(void)
{
	return hd_module_unload();
}

static int load(const char *path)
{
	return hd_module_load(path, "");
}

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

static void expect_busy(void)
{
	int r = unload();

	KTAP_EXPECT(r == -EBUSY || r == -EAGAIN);
	KTAP_EXPECT(exists("/sys/module/haccel"));
}

static void refused_with_open_file(void)
{
	int fd;
	char *mem = hd_alloc(SIZE, -1);
	uint32_t h;

	module_path();
	fd = hd_open();
	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	expect_busy();
	/* Still fully working after the refusal. */
	KTAP_EXPECT_EQ(hd_node_total(fd), SIZE);
	close(fd);
}

static void refused_with_dmabuf(void)
{
	int fd, dmabuf, probe;
	char *mem = hd_alloc(SIZE, -1);
	uint32_t h;

	module_path();
	fd = hd_open();
	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	close(fd);
	expect_busy();
	probe = hd_open();
	KTAP_EXPECT_EQ(hd_node_total(probe), SIZE);
	close(probe);
	close(dmabuf);
}

static void refused_with_mapping(void)
{
	int fd, dmabuf, probe;
	char *mem = hd_alloc(SIZE, -1), *map;
	uint32_t h;

	module_path();
	fd = hd_open();
	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	close(dmabuf);
	close(fd);
	expect_busy();
	map[0] = 1;
	KTAP_EXPECT_EQ(mem[0], 1);
	KTAP_ASSERT_EQ(munmap(map, SIZE), 0);
	probe = hd_open();
	KTAP_EXPECT_EQ(hd_node_total(probe), 0);
	close(probe);
}

/*
 * Everything a client can make, made and released again: files with
 * buffers closed whole, dma-bufs outliving their files, imports into
 * another file, mappings, failed PINs of each kind, a child killed while
 * it holds buffers.
 */
static void workload(void)
{
	size_t pg = hd_page();
	char *mem = hd_alloc(16 * pg, -1), *hole = hd_alloc(4 * pg, -1);
	int node1 = hd_online_nodes() >= 2;

	KTAP_ASSERT_EQ(munmap(hole + 3 * pg, pg), 0);
	for (int round = 0; round < 20; round++) {
		int fd = hd_open(), fd2 = hd_open(), dmabuf, status;
		uint32_t h[3], h2;
		struct hd_stats st;
		char *map;
		pid_t pid;

		for (int i = 0; i < 3; i++)
			KTAP_ASSERT_EQ(hd_pin(fd, mem + i * pg, (1 + i) * pg, HACCEL_DRM_NODE_ANY, 0,
					      &h[i]), 0);
		dmabuf = hd_export(fd, h[0], 0);
		KTAP_ASSERT(dmabuf >= 0);
		KTAP_EXPECT_EQ(hd_import(fd2, dmabuf, &h2), 0);
		map = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
		KTAP_ASSERT(map != MAP_FAILED);
		KTAP_EXPECT_EQ(hd_close_handle(fd, h[1]), 0);
		hd_stats(fd, &st);
		/* Failed PINs: partly unmapped, a bad flag, a wrong node. */
		KTAP_EXPECT_EQ(hd_pin(fd, hole, 4 * pg, HACCEL_DRM_NODE_ANY, 0, &h[1]), -EFAULT);
		KTAP_EXPECT_EQ(hd_pin(fd, mem, pg, HACCEL_DRM_NODE_ANY, 0x80, &h[1]), -EINVAL);
		if (node1)
			KTAP_EXPECT(hd_pin(fd, mem, pg, 1, HACCEL_PIN_STRICT_NODE, &h[1]) ==
				    -EXDEV || hd_pages_on(mem, pg, 1) == 1);
		close(fd);
		munmap(map, pg);
		close(fd2);
		close(dmabuf);
		/* A child holding buffers, killed. */
		pid = fork();
		KTAP_ASSERT(pid >= 0);
		if (pid == 0) {
			int cfd = hd_try_open();
			uint32_t ch;

			if (cfd < 0 || hd_pin(cfd, mem, 4 * pg, HACCEL_DRM_NODE_ANY, 0, &ch))
				_exit(2);
			kill(getpid(), SIGKILL);
			_exit(3);
		}
		KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
		KTAP_EXPECT(WIFSIGNALED(status));
	}
}

/*
 * The allocator's own count of live objects allocated at haccel sites
 * (slab allocation traces, tests/driver-util.h) is where it was after a
 * workload that releases everything it made: no client, buffer or node
 * array leaks on any of those paths.
 */
static void workload_leaves_no_objects(void)
{
	long long before = hd_live_objects(0), after;
	int fd;

	if (before < 0)
		hd_missing("no slab allocation traces (boot with slub_debug=U, mount debugfs)");
	workload();
	after = hd_live_objects(0);
	ktap_diag("live objects at haccel sites: %lld before, %lld after", before, after);
	if (after > before)
		hd_live_objects(1);
	KTAP_EXPECT(after <= before);
	fd = hd_open();
	KTAP_EXPECT_EQ(hd_node_total(fd), 0);
	close(fd);
}

static int render_nodes_named_haccel(void)
{
	int fd = hd_try_open();

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static void unload_clean_and_reload(void)
{
	const char *path = module_path();
	int fd;

	KTAP_ASSERT_EQ(unload(), 0);
	/* No page is left pinned by anyone (the guest runs nothing else that pins). */
	{
		long long pins = hd_foll_pins();

		KTAP_EXPECT(pins == 0 || pins == -1);
	}
	KTAP_EXPECT(!exists("/sys/module/haccel"));
	KTAP_EXPECT(!exists("/sys/kernel/debug/haccel"));
	KTAP_EXPECT(!exists("/sys/bus/platform/devices/haccel"));
	KTAP_EXPECT_EQ(render_nodes_named_haccel(), 0);
	/* A second unload finds nothing to unload. */
	KTAP_EXPECT_EQ(unload(), -ENOENT);

	KTAP_ASSERT_EQ(load(path), 0);
	fd = hd_open();
	{
		struct hd_stats st;

		hd_stats(fd, &st);
		KTAP_EXPECT_EQ(st.s.node_total, 0);
		KTAP_EXPECT_EQ(st.s.node_bos, 0);
	}
	KTAP_EXPECT(exists("/sys/kernel/debug/haccel/clients"));
	close(fd);
	/* And once more, to be sure a reload leaves nothing behind either. */
	KTAP_EXPECT_EQ(unload(), 0);
	KTAP_EXPECT_EQ(load(path), 0);
	KTAP_EXPECT_EQ(render_nodes_named_haccel(), 1);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(refused_with_open_file),
	KTAP_CASE(refused_with_dmabuf),
	KTAP_CASE(refused_with_mapping),
	KTAP_CASE(workload_leaves_no_objects),
	KTAP_CASE(unload_clean_and_reload),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
