// SPDX-License-Identifier: MIT
/* Module unload: refused while a file, a dma-buf or a mapping keeps buffers alive; after cleanup it succeeds, leaves nothing, and reloads clean. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "driver-util.h"

#define SIZE (64u << 10)

static const char *module_path(void)
{
	const char *p = getenv("HACCEL_MODULE");

	if (!p)
		ktap_skip("HACCEL_MODULE (the path of haccel.ko) is not set: runs in the VM");
	return p;
}

static int unload(void)
{
	return syscall(SYS_delete_module, "haccel", O_NONBLOCK) ? -errno : 0;
}

static int load(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	return r;
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
	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_NODE_ANY, 0, &h), 0);
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
	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_NODE_ANY, 0, &h), 0);
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
	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_NODE_ANY, 0, &h), 0);
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
	KTAP_CASE(unload_clean_and_reload),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
