// SPDX-License-Identifier: MIT
/* dma-buf export: another process imports and maps the buffer and sees the first one's writes (and the other way round). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver-util.h"

#define NPAGES 8

static uint64_t pattern(size_t i, uint64_t salt)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull ^ salt;

	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ull;
}

static void fill(void *p, size_t bytes, uint64_t salt)
{
	uint64_t *w = p;

	for (size_t i = 0; i < bytes / 8; i++)
		w[i] = pattern(i, salt);
}

static size_t mismatches(const void *p, size_t bytes, uint64_t salt)
{
	const uint64_t *w = p;
	size_t bad = 0;

	for (size_t i = 0; i < bytes / 8; i++)
		bad += w[i] != pattern(i, salt);
	return bad;
}

/*
 * The child is forked before the export, so it gets the dma-buf only
 * through the socket: it maps it, checks the parent's first half, writes
 * the second half, and imports it into its own file of the device.
 */
static void other_process_maps_and_imports(void)
{
	int fd = hd_open(), sv[2], status;
	size_t pg = hd_page(), size = NPAGES * pg, half = size / 2;
	char *mem = hd_alloc(size, -1);
	uint32_t h;
	char ack;
	pid_t pid;

	KTAP_ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		struct drm_haccel_bo_info bi;
		uint64_t pages[HD_MAX_NODES] = { 0 };
		int dmabuf, cfd, rc = 0;
		uint32_t ch;
		char *map;

		close(sv[0]);
		dmabuf = hd_recv_fd(sv[1]);
		if (dmabuf < 0)
			_exit(10);
		map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
		if (map == MAP_FAILED)
			_exit(11);
		if (mismatches(map, half, 1))
			rc = 12;
		fill(map + half, half, 2);
		cfd = hd_try_open();
		if (cfd < 0 || hd_import(cfd, dmabuf, &ch))
			_exit(13);
		if (hd_bo_info(cfd, ch, &bi, pages, HD_MAX_NODES) || bi.size != size)
			rc = 14;
		/* Only the pinning process learns the address it pinned. */
		if (bi.addr != 0)
			rc = 15;
		if (pages[0] + pages[1] != NPAGES)
			rc = 16;
		if (write(sv[1], "d", 1) != 1)
			rc = 17;
		_exit(rc);
	}
	close(sv[1]);
	fill(mem, half, 1);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	{
		int dmabuf = hd_export(fd, h, 0);

		KTAP_ASSERT(dmabuf >= 0);
		KTAP_ASSERT_EQ(hd_send_fd(sv[0], dmabuf), 0);
		close(dmabuf);
	}
	KTAP_EXPECT_EQ(read(sv[0], &ack, 1), 1);
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFEXITED(status));
	KTAP_EXPECT_EQ(WEXITSTATUS(status), 0);
	/* The child's writes landed in the parent's own memory. */
	KTAP_EXPECT_EQ(mismatches(mem + half, half, 2), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void self_import_same_handle(void)
{
	int fd = hd_open(), dmabuf;
	size_t size = NPAGES * hd_page();
	char *mem = hd_alloc(size, -1);
	uint32_t h, h2;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	KTAP_ASSERT_EQ(hd_import(fd, dmabuf, &h2), 0);
	KTAP_EXPECT_EQ(h2, h);
	close(dmabuf);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void map_offset_and_bounds(void)
{
	int fd = hd_open(), dmabuf;
	size_t pg = hd_page(), size = NPAGES * pg;
	char *mem = hd_alloc(size, -1), *map;
	uint32_t h;

	fill(mem, size, 7);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	map = mmap(NULL, 2 * pg, PROT_READ, MAP_SHARED, dmabuf, 3 * pg);
	KTAP_ASSERT(map != MAP_FAILED);
	KTAP_EXPECT_EQ(memcmp(map, mem + 3 * pg, 2 * pg), 0);
	munmap(map, 2 * pg);
	/* Past the end, or a private (copy-on-write) mapping: refused. */
	KTAP_EXPECT(mmap(NULL, size + pg, PROT_READ, MAP_SHARED, dmabuf, 0) == MAP_FAILED);
	KTAP_EXPECT(mmap(NULL, 2 * pg, PROT_READ, MAP_SHARED, dmabuf, (NPAGES - 1) * pg) ==
		    MAP_FAILED);
	errno = 0;
	KTAP_EXPECT(mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, dmabuf, 0) ==
		    MAP_FAILED);
	KTAP_EXPECT_EQ(errno, EINVAL);
	close(dmabuf);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void readonly_export(void)
{
	int fd = hd_open(), dmabuf;
	size_t size = NPAGES * hd_page();
	char *mem = hd_alloc(size, -1), *map;
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd, h, 1);
	KTAP_ASSERT(dmabuf >= 0);
	errno = 0;
	KTAP_EXPECT(mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0) ==
		    MAP_FAILED);
	KTAP_EXPECT_EQ(errno, EACCES);
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, dmabuf, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	KTAP_EXPECT_EQ(map[0], 0x5a);
	munmap(map, size);
	close(dmabuf);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

/* Whether a dma-buf fd maps PROT_WRITE | MAP_SHARED (1), is refused with EACCES (0), or -1. */
static int maps_writable(int dmabuf, size_t size)
{
	char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);

	if (map != MAP_FAILED) {
		munmap(map, size);
		return 1;
	}
	return errno == EACCES ? 0 : -1;
}

/*
 * A buffer has one dma-buf, made by its first export with that export's
 * mode and kept while the buffer has a handle: a later export in the other
 * mode is refused with EBUSY, from any file and however the earlier fds
 * were closed, rather than hand out the first one's fd (a "read-only"
 * export that maps writable, or the other way round). The same mode
 * exports again, as the same dma-buf.
 */
static void export_mode_is_the_first_exports(void)
{
	int fd = hd_open(), fd2 = hd_open(), a, b;
	size_t size = NPAGES * hd_page();
	char *mem = hd_alloc(size, -1), *map;
	uint64_t base = hd_node_total(fd);
	struct stat sa, sb;
	uint32_t h, h2;

	/* Read-write first: a read-only export is refused, even with no fd left. */
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	a = hd_export(fd, h, 0);
	KTAP_ASSERT(a >= 0);
	KTAP_EXPECT_EQ(hd_export(fd, h, 1), -EBUSY);
	close(a);
	KTAP_EXPECT_EQ(hd_export(fd, h, 1), -EBUSY);
	/* Imported into another file: refused there too, the same mode works. */
	a = hd_export(fd, h, 0);
	KTAP_ASSERT(a >= 0);
	KTAP_EXPECT_EQ(maps_writable(a, size), 1);
	KTAP_ASSERT_EQ(hd_import(fd2, a, &h2), 0);
	close(a);
	KTAP_EXPECT_EQ(hd_export(fd2, h2, 1), -EBUSY);
	b = hd_export(fd2, h2, 0);
	KTAP_ASSERT(b >= 0);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, b, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	map[0] = 0x11;
	KTAP_EXPECT_EQ(mem[0], 0x11);
	munmap(map, size);
	close(b);
	KTAP_EXPECT_EQ(hd_close_handle(fd2, h2), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);

	/* Read-only first: a read-write export is refused, from either file. */
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	a = hd_export(fd, h, 1);
	KTAP_ASSERT(a >= 0);
	close(a);
	KTAP_EXPECT_EQ(hd_export(fd, h, 0), -EBUSY);
	a = hd_export(fd, h, 1);
	KTAP_ASSERT(a >= 0);
	b = hd_export(fd, h, 1);
	KTAP_ASSERT(b >= 0);
	/* The same dma-buf both times, read-only. */
	KTAP_ASSERT_EQ(fstat(a, &sa), 0);
	KTAP_ASSERT_EQ(fstat(b, &sb), 0);
	KTAP_EXPECT(sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev);
	KTAP_EXPECT_EQ(fcntl(a, F_GETFL) & O_ACCMODE, O_RDONLY);
	KTAP_EXPECT_EQ(maps_writable(a, size), 0);
	close(b);
	KTAP_ASSERT_EQ(hd_import(fd2, a, &h2), 0);
	KTAP_EXPECT_EQ(hd_export(fd2, h2, 0), -EBUSY);
	/* Every handle closed, the fd alive: imported again, still read-only. */
	KTAP_EXPECT_EQ(hd_close_handle(fd2, h2), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_ASSERT_EQ(hd_import(fd2, a, &h2), 0);
	close(a);
	KTAP_EXPECT_EQ(hd_export(fd2, h2, 0), -EBUSY);
	b = hd_export(fd2, h2, 1);
	KTAP_ASSERT(b >= 0);
	KTAP_EXPECT_EQ(maps_writable(b, size), 0);
	close(b);
	KTAP_EXPECT_EQ(hd_close_handle(fd2, h2), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	close(fd2);
	close(fd);
}

/* A mapping alone keeps the buffer (and its pin) alive. */
static void mapping_keeps_buffer(void)
{
	int fd = hd_open(), dmabuf;
	size_t size = NPAGES * hd_page();
	char *mem = hd_alloc(size, -1), *map;
	uint64_t base = hd_node_total(fd);
	uint32_t h;

	fill(mem, size, 9);
	KTAP_ASSERT_EQ(hd_pin(fd, mem, size, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	close(dmabuf);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + size);
	KTAP_EXPECT_EQ(mismatches(map, size, 9), 0);
	/* Still the same pages as the owner's mapping. */
	map[0] = 0x42;
	KTAP_EXPECT_EQ(mem[0], 0x42);
	KTAP_ASSERT_EQ(munmap(map, size), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
}

/* A dma-buf of udmabuf (a memfd's pages), or -1 if there is no /dev/udmabuf. */
static int udmabuf_make(size_t size)
{
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = size };
	int udev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC), memfd, dmabuf;

	if (udev < 0)
		return -1;
	memfd = (int)syscall(SYS_memfd_create, "haccel-udmabuf", MFD_ALLOW_SEALING);
	KTAP_ASSERT(memfd >= 0);
	KTAP_ASSERT_EQ(ftruncate(memfd, (off_t)size), 0);
	KTAP_ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	c.memfd = (uint32_t)memfd;
	dmabuf = ioctl(udev, UDMABUF_CREATE, &c);
	KTAP_ASSERT(dmabuf >= 0);
	close(memfd);
	close(udev);
	return dmabuf;
}

/* A dma-buf of a vgem dumb buffer, or -1 if vgem is not loaded. */
static int vgem_make(size_t size)
{
	for (int minor = 0; minor < 64; minor++) {
		struct drm_mode_create_dumb c = { .width = (uint32_t)(size / 4), .height = 1,
						  .bpp = 32 };
		char path[64], name[32] = "";
		struct drm_version v = { .name = name, .name_len = sizeof(name) - 1 };
		int fd, dmabuf;

		snprintf(path, sizeof(path), "/dev/dri/card%d", minor);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (hd_ioctl(fd, DRM_IOCTL_VERSION, &v) || strcmp(name, "vgem")) {
			close(fd);
			continue;
		}
		KTAP_ASSERT_EQ(hd_ioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &c), 0);
		dmabuf = hd_export(fd, c.handle, 0);
		KTAP_ASSERT(dmabuf >= 0);
		/* The dma-buf keeps the buffer; the device file can go. */
		close(fd);
		return dmabuf;
	}
	return -1;
}

/*
 * A dma-buf of another exporter (udmabuf, vgem) is not importable: haccel
 * only pins. Nor is a mapping of one pinnable: it has no pages behind it
 * that GUP may take (VM_PFNMAP).
 */
static void foreign_dmabuf_refused(void)
{
	int fd = hd_open(), dmabuf, tried = 0;
	size_t size = 2 * hd_page();
	uint64_t base = hd_node_total(fd);
	const char *names[2] = { "udmabuf", "vgem" };
	uint32_t h;

	for (int i = 0; i < 2; i++) {
		char *map;

		dmabuf = i == 0 ? udmabuf_make(size) : vgem_make(size);
		if (dmabuf < 0)
			continue;
		tried++;
		ktap_diag("foreign dma-buf from %s", names[i]);
		KTAP_EXPECT_EQ(hd_import(fd, dmabuf, &h), -EINVAL);
		map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
		if (map != MAP_FAILED) {
			map[0] = 1;
			KTAP_EXPECT(hd_pin(fd, map, size, HACCEL_DRM_NODE_ANY, 0, &h) < 0);
			munmap(map, size);
		}
		close(dmabuf);
	}
	if (!tried)
		hd_missing("no exporter of foreign dma-bufs: no /dev/udmabuf (CONFIG_UDMABUF), vgem not loaded");
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(other_process_maps_and_imports),
	KTAP_CASE(self_import_same_handle),
	KTAP_CASE(map_offset_and_bounds),
	KTAP_CASE(readonly_export),
	KTAP_CASE(export_mode_is_the_first_exports),
	KTAP_CASE(mapping_keeps_buffer),
	KTAP_CASE(foreign_dmabuf_refused),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
