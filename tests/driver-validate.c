// SPDX-License-Identifier: MIT
/* Every validation failure of every haccel ioctl, each call otherwise valid, structs smaller and larger than the ABI, bad struct pointers, and which kinds of memory PIN takes. */
#include "config.h"

#include <errno.h>
#include <linux/magic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

#include "driver-util.h"

#define NPAGES 4

/* The first ABI version, frozen: docs/abi.md lists these sizes. */
_Static_assert(sizeof(struct drm_haccel_param) == 16, "param");
_Static_assert(sizeof(struct drm_haccel_pin) == 32, "pin");
_Static_assert(sizeof(struct drm_haccel_bo_info) == 40, "bo_info");
_Static_assert(sizeof(struct drm_haccel_stats) == 56, "stats");
_Static_assert(sizeof(struct drm_haccel_quota) == 24, "quota");

/* A pinnable region, a PIN struct for it that succeeds, and the device. */
struct fixture {
	int fd;
	size_t pg;
	char *mem;
	struct drm_haccel_pin pin;
};

static struct fixture fx_make(void)
{
	struct fixture f;

	f.fd = hd_open();
	f.pg = hd_page();
	f.mem = hd_alloc(NPAGES * f.pg, -1);
	memset(&f.pin, 0, sizeof(f.pin));
	f.pin.addr = (uintptr_t)f.mem;
	f.pin.size = NPAGES * f.pg;
	f.pin.node = HACCEL_DRM_NODE_ANY;
	return f;
}

/* Run PIN with args; on success close the handle. */
static int pin_try(int fd, struct drm_haccel_pin p)
{
	int r = hd_ioctl(fd, DRM_IOCTL_HACCEL_PIN, &p);

	if (r == 0)
		KTAP_EXPECT_EQ(hd_close_handle(fd, p.handle), 0);
	return r;
}

/*
 * Expect PIN to fail with err and leave nothing pinned: no buffer, no
 * bytes, and (where the kernel counts them) no page pinned.
 */
static void pin_expect(struct fixture *f, struct drm_haccel_pin p, int err)
{
	struct hd_stats before, after;
	long long pins = hd_foll_pins();

	hd_stats(f->fd, &before);
	KTAP_EXPECT_EQ(pin_try(f->fd, p), err);
	hd_stats(f->fd, &after);
	KTAP_EXPECT_EQ(after.s.node_total, before.s.node_total);
	KTAP_EXPECT_EQ(after.s.client_bos, before.s.client_bos);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
}

/* A page holding len bytes of data, then protected with prot. */
static void *page_with(const void *data, size_t len, int prot)
{
	void *p = mmap(NULL, hd_page(), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	KTAP_ASSERT(p != MAP_FAILED);
	memcpy(p, data, len);
	KTAP_ASSERT_EQ(mprotect(p, hd_page(), prot), 0);
	return p;
}

/* --- GET_PARAM ------------------------------------------------------------ */

static void param_valid(void)
{
	int fd = hd_open();

	KTAP_EXPECT_EQ(hd_param(fd, HACCEL_PARAM_UAPI_VERSION), HACCEL_UAPI_VERSION);
	KTAP_EXPECT(hd_param(fd, HACCEL_PARAM_UAPI_MIN_VERSION) <= HACCEL_UAPI_VERSION);
	KTAP_EXPECT_EQ(hd_param(fd, HACCEL_PARAM_PAGE_SIZE), hd_page());
	KTAP_EXPECT(hd_param(fd, HACCEL_PARAM_MAX_PIN_SIZE) >= (1ull << 30));
	KTAP_EXPECT(hd_param(fd, HACCEL_PARAM_NUM_NODES) >= 1);
}

static void param_unknown_flag(void)
{
	int fd = hd_open();

	for (int bit = 0; bit < 32; bit++) {
		struct drm_haccel_param p = { .param = HACCEL_PARAM_CAPS,
					      .flags = 1u << bit };

		KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_GET_PARAM, &p), -EINVAL);
	}
}

static void param_unknown_param(void)
{
	static const uint32_t bad[] = { HACCEL_PARAM_MAX_PIN_SIZE + 1, 64, 0x7fffffff,
					0xffffffff };
	int fd = hd_open();

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct drm_haccel_param p = { .param = bad[i] };

		KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_GET_PARAM, &p), -EINVAL);
	}
}

static void param_bad_pointer(void)
{
	int fd = hd_open();

	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_GET_PARAM, NULL), -EFAULT);
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_GET_PARAM, (void *)8), -EFAULT);
}

/* --- struct size and direction, all ioctls -------------------------------- */

struct sized {
	unsigned int nr, dir, size;
	const char *name;
};

static const struct sized ioctls[] = {
	{ DRM_HACCEL_GET_PARAM, _IOC_READ | _IOC_WRITE, sizeof(struct drm_haccel_param), "GET_PARAM" },
	{ DRM_HACCEL_PIN, _IOC_READ | _IOC_WRITE, sizeof(struct drm_haccel_pin), "PIN" },
	{ DRM_HACCEL_BO_INFO, _IOC_READ | _IOC_WRITE, sizeof(struct drm_haccel_bo_info), "BO_INFO" },
	{ DRM_HACCEL_STATS, _IOC_READ | _IOC_WRITE, sizeof(struct drm_haccel_stats), "STATS" },
	{ DRM_HACCEL_QUOTA_GET, _IOC_READ | _IOC_WRITE, sizeof(struct drm_haccel_quota), "QUOTA_GET" },
	{ DRM_HACCEL_QUOTA_SET, _IOC_WRITE, sizeof(struct drm_haccel_quota), "QUOTA_SET" },
};

/* Fill buf with a valid argument for ioctl i (a live handle where needed). */
static void valid_arg(struct fixture *f, size_t i, void *buf, uint32_t handle)
{
	switch (ioctls[i].nr) {
	case DRM_HACCEL_GET_PARAM: {
		struct drm_haccel_param p = { .param = HACCEL_PARAM_UAPI_VERSION };

		memcpy(buf, &p, sizeof(p));
		break;
	}
	case DRM_HACCEL_PIN:
		memcpy(buf, &f->pin, sizeof(f->pin));
		break;
	case DRM_HACCEL_BO_INFO: {
		struct drm_haccel_bo_info b = { .handle = handle };

		memcpy(buf, &b, sizeof(b));
		break;
	}
	case DRM_HACCEL_STATS:
		break;
	case DRM_HACCEL_QUOTA_GET:
	case DRM_HACCEL_QUOTA_SET: {
		struct drm_haccel_quota q;

		KTAP_ASSERT_EQ(hd_quota_get(f->fd, 0, &q), 0);
		memcpy(buf, &q, sizeof(q));
		break;
	}
	}
}

/* Call ioctl i with a struct of size bytes, tail filled with tail_byte. */
static int call_sized(struct fixture *f, size_t i, unsigned int dir,
		      unsigned int size, unsigned char tail_byte, uint32_t handle)
{
	unsigned char buf[256];
	int r;

	memset(buf, 0, sizeof(buf));
	valid_arg(f, i, buf, handle);
	if (size > ioctls[i].size)
		memset(buf + ioctls[i].size, tail_byte, size - ioctls[i].size);
	r = hd_ioctl(f->fd, hd_cmd(ioctls[i].nr, dir, size), buf);
	if (r == 0 && ioctls[i].nr == DRM_HACCEL_PIN) {
		struct drm_haccel_pin p;

		memcpy(&p, buf, sizeof(p));
		KTAP_EXPECT_EQ(hd_close_handle(f->fd, p.handle), 0);
	}
	return r;
}

static uint32_t live_handle(struct fixture *f)
{
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(f->fd, f->mem, f->pg, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	return h;
}

static void struct_exact_size(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);

	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		int r = call_sized(&f, i, ioctls[i].dir, ioctls[i].size, 0, h);

		if (r)
			ktap_diag("%s: %d", ioctls[i].name, r);
		KTAP_EXPECT_EQ(r, 0);
	}
}

static void struct_smaller(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);

	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		for (unsigned int size = 0; size < ioctls[i].size; size += 4) {
			int r = call_sized(&f, i, ioctls[i].dir, size, 0, h);

			if (r != -EINVAL)
				ktap_diag("%s size %u: %d", ioctls[i].name, size, r);
			KTAP_EXPECT_EQ(r, -EINVAL);
		}
	}
}

static void struct_larger_zero_tail(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);

	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		for (unsigned int extra = 4; extra <= 64; extra *= 2) {
			int r = call_sized(&f, i, ioctls[i].dir,
					   ioctls[i].size + extra, 0, h);

			if (r)
				ktap_diag("%s +%u: %d", ioctls[i].name, extra, r);
			KTAP_EXPECT_EQ(r, 0);
		}
	}
}

static void struct_larger_nonzero_tail(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);
	uint64_t before = hd_node_total(f.fd);

	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		for (unsigned int extra = 4; extra <= 64; extra *= 2) {
			int r = call_sized(&f, i, ioctls[i].dir,
					   ioctls[i].size + extra, 0xa5, h);

			if (r != -E2BIG)
				ktap_diag("%s +%u: %d", ioctls[i].name, extra, r);
			KTAP_EXPECT_EQ(r, -E2BIG);
		}
	}
	KTAP_EXPECT_EQ(hd_node_total(f.fd), before);
}

static void struct_wrong_direction(void)
{
	static const unsigned int dirs[] = { _IOC_NONE, _IOC_READ, _IOC_WRITE,
					     _IOC_READ | _IOC_WRITE };
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);

	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		for (size_t d = 0; d < 4; d++) {
			if (dirs[d] == ioctls[i].dir)
				continue;
			KTAP_EXPECT_EQ(call_sized(&f, i, dirs[d], ioctls[i].size, 0, h),
				       -EINVAL);
		}
	}
}

static void ioctl_beyond_table(void)
{
	int fd = hd_open();
	unsigned char buf[64] = { 0 };

	KTAP_EXPECT_EQ(hd_ioctl(fd, hd_cmd(DRM_HACCEL_QUOTA_SET + 1,
					   _IOC_READ | _IOC_WRITE, 16), buf), -EINVAL);
	KTAP_EXPECT_EQ(hd_ioctl(fd, hd_cmd(0x3f, _IOC_READ | _IOC_WRITE, 16), buf),
		       -EINVAL);
}

/* --- PIN ------------------------------------------------------------------ */

static void pin_valid(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	KTAP_ASSERT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_PIN, &p), 0);
	KTAP_EXPECT(p.handle != 0);
	KTAP_EXPECT_EQ(hd_close_handle(f.fd, p.handle), 0);
}

static void pin_unknown_flag(void)
{
	struct fixture f = fx_make();

	for (int bit = 1; bit < 32; bit++) {
		struct drm_haccel_pin p = f.pin;

		p.flags = 1u << bit;
		pin_expect(&f, p, -EINVAL);
	}
}

static void pin_pad_nonzero(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.pad = 1;
	pin_expect(&f, p, -EINVAL);
	p.pad = 0x80000000u;
	pin_expect(&f, p, -EINVAL);
}

static void pin_zero_size(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.size = 0;
	pin_expect(&f, p, -EINVAL);
}

static void pin_size_overflow(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.size = UINT64_MAX - f.pg + 1; /* aligned, wraps past the end */
	pin_expect(&f, p, -EINVAL);
	p.addr = UINT64_MAX - f.pg + 1;
	p.size = 2 * f.pg;
	pin_expect(&f, p, -EINVAL);
}

static void pin_size_over_max(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;
	uint64_t max = hd_param(f.fd, HACCEL_PARAM_MAX_PIN_SIZE);

	p.size = max + f.pg;
	pin_expect(&f, p, -EINVAL);
}

static void pin_unaligned_addr(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.addr += 1;
	pin_expect(&f, p, -EINVAL);
	p.addr = f.pin.addr + f.pg / 2;
	pin_expect(&f, p, -EINVAL);
}

static void pin_unaligned_size(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.size = f.pg - 1;
	pin_expect(&f, p, -EINVAL);
	p.size = f.pg + 8;
	pin_expect(&f, p, -EINVAL);
}

static void pin_unmapped(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	KTAP_ASSERT_EQ(munmap(f.mem, NPAGES * f.pg), 0);
	pin_expect(&f, p, -EFAULT);
	p.addr = 0;
	p.size = f.pg;
	pin_expect(&f, p, -EFAULT);
}

/* The first pages pin, then one is missing: all of it unwinds. */
static void pin_partly_unmapped(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	KTAP_ASSERT_EQ(munmap(f.mem + (NPAGES - 1) * f.pg, f.pg), 0);
	pin_expect(&f, p, -EFAULT);
}

static void pin_kernel_address(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.addr = 0xffff800000000000ull;
	pin_expect(&f, p, -EFAULT);
	p.addr = 0x00007ffffffff000ull;
	p.size = 2 * f.pg; /* crosses the top of user space */
	pin_expect(&f, p, -EFAULT);
}

static void pin_readonly_mapping(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	KTAP_ASSERT_EQ(mprotect(f.mem, NPAGES * f.pg, PROT_READ), 0);
	pin_expect(&f, p, -EFAULT);
	KTAP_ASSERT_EQ(mprotect(f.mem, NPAGES * f.pg, PROT_NONE), 0);
	pin_expect(&f, p, -EFAULT);
}

/* A dma-buf mapping is VM_PFNMAP: no pages to pin behind it. */
static void pin_pfnmap_mapping(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;
	uint32_t h = live_handle(&f);
	int dmabuf = hd_export(f.fd, h, 0);
	void *map;

	KTAP_ASSERT(dmabuf >= 0);
	map = mmap(NULL, f.pg, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	p.addr = (uintptr_t)map;
	p.size = f.pg;
	pin_expect(&f, p, -EFAULT);
	munmap(map, f.pg);
	close(dmabuf);
}

/* --- PIN: which memory --------------------------------------------------- */

/*
 * A file of size bytes on the scratch disk (ext4, mounted read-write by
 * the VM runner; HACCEL_VM_SCRATCH): page cache that the file system
 * writes back.
 */
static int scratch_file(size_t size)
{
	const char *dir = getenv("HACCEL_VM_SCRATCH");
	char path[256];
	struct statfs sf;
	int fd;

	if (!dir)
		hd_missing("HACCEL_VM_SCRATCH (a directory on a disk file system) is not set: runs in the VM");
	KTAP_ASSERT_EQ(statfs(dir, &sf), 0);
	if (sf.f_type == TMPFS_MAGIC)
		hd_missing("%s is tmpfs, not a disk file system", dir);
	snprintf(path, sizeof(path), "%s/pin-XXXXXX", dir);
	fd = mkstemp(path);
	KTAP_ASSERT(fd >= 0);
	KTAP_ASSERT_EQ(unlink(path), 0);
	KTAP_ASSERT_EQ(ftruncate(fd, (off_t)size), 0);
	return fd;
}

/* Expect PIN of [map, map + size) to succeed, be counted, and close. */
static void pin_accepted(struct fixture *f, void *map, size_t size, const char *what)
{
	struct drm_haccel_bo_info bi;
	uint64_t before = hd_node_total(f->fd);
	uint32_t h;
	int r = hd_pin(f->fd, map, size, HACCEL_DRM_NODE_ANY, 0, &h);

	if (r)
		ktap_diag("%s: %d", what, r);
	KTAP_ASSERT_EQ(r, 0);
	KTAP_EXPECT_EQ(hd_node_total(f->fd), before + size);
	KTAP_EXPECT_EQ(hd_bo_info(f->fd, h, &bi, NULL, 0), 0);
	KTAP_EXPECT_EQ(bi.size, size);
	KTAP_EXPECT_EQ(hd_close_handle(f->fd, h), 0);
	KTAP_EXPECT_EQ(hd_node_total(f->fd), before);
}

/* Shared file mappings of a disk file system: page cache, never pinned. */
static void pin_file_shared_refused(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;
	size_t size = NPAGES * f.pg;
	int file = scratch_file(size);
	char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0), *mixed;

	KTAP_ASSERT(map != MAP_FAILED);
	memset(map, 0x3c, size);
	p.addr = (uintptr_t)map;
	pin_expect(&f, p, -EOPNOTSUPP);
	/* Read-only, the kind decides before the permission. */
	KTAP_ASSERT_EQ(mprotect(map, size, PROT_READ), 0);
	pin_expect(&f, p, -EOPNOTSUPP);
	/* Anonymous pages, then one file page: refused whole, nothing pinned. */
	mixed = hd_alloc(2 * size, -1);
	KTAP_ASSERT(mmap(mixed + 2 * size - f.pg, f.pg, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, file, 0) != MAP_FAILED);
	p.addr = (uintptr_t)mixed;
	p.size = 2 * size;
	pin_expect(&f, p, -EOPNOTSUPP);
	/* The anonymous part alone pins. */
	p.size = 2 * size - f.pg;
	KTAP_EXPECT_EQ(pin_try(f.fd, p), 0);
	close(file);
}

/*
 * A private file mapping is refused too, even written: its written pages
 * are anonymous copies, the others still the file's page cache.
 */
static void pin_file_private_refused(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;
	size_t size = NPAGES * f.pg;
	int file = scratch_file(size);
	char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file, 0);

	KTAP_ASSERT(map != MAP_FAILED);
	p.addr = (uintptr_t)map;
	pin_expect(&f, p, -EOPNOTSUPP);
	memset(map, 0x3c, size);
	pin_expect(&f, p, -EOPNOTSUPP);
	close(file);
}

/* shmem: memfd (shared and private), shared anonymous memory, tmpfs files. */
static void pin_shmem_accepted(void)
{
	struct fixture f = fx_make();
	size_t size = NPAGES * f.pg;
	int memfd = (int)syscall(SYS_memfd_create, "haccel-pin", 0);
	struct statfs sf;
	char *map;

	KTAP_ASSERT(memfd >= 0);
	KTAP_ASSERT_EQ(ftruncate(memfd, (off_t)size), 0);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	pin_accepted(&f, map, size, "memfd MAP_SHARED");
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, memfd, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	pin_accepted(&f, map, size, "memfd MAP_PRIVATE");
	close(memfd);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	pin_accepted(&f, map, size, "MAP_SHARED | MAP_ANONYMOUS");
	/* The guest's /tmp is tmpfs (tests/vm/init.sh). */
	if (statfs("/tmp", &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
		char path[] = "/tmp/haccel-pin-XXXXXX";
		int file = mkstemp(path);

		KTAP_ASSERT(file >= 0);
		unlink(path);
		KTAP_ASSERT_EQ(ftruncate(file, (off_t)size), 0);
		map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
		KTAP_ASSERT(map != MAP_FAILED);
		pin_accepted(&f, map, size, "tmpfs file MAP_SHARED");
		close(file);
	} else if (hd_in_vm()) {
		ktap_fail_at(__FILE__, __LINE__, "/tmp is not tmpfs in the VM");
	}
}

/* hugetlb: anonymous MAP_HUGETLB and a hugetlbfs memfd. */
static void pin_hugetlb_accepted(void)
{
	struct fixture f = fx_make();
	size_t huge = 2u << 20;
	FILE *nr = fopen("/proc/sys/vm/nr_hugepages", "w");
	char *map;
	int memfd;

	if (nr) {
		fputs("4", nr);
		fclose(nr);
	}
	map = mmap(NULL, huge, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (map == MAP_FAILED)
		ktap_skip("no 2 MiB huge pages: %s", strerror(errno));
	memset(map, 1, huge);
	pin_accepted(&f, map, huge, "MAP_HUGETLB");
	munmap(map, huge);
	memfd = (int)syscall(SYS_memfd_create, "haccel-huge", MFD_HUGETLB);
	KTAP_ASSERT(memfd >= 0);
	KTAP_ASSERT_EQ(ftruncate(memfd, (off_t)huge), 0);
	map = mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	KTAP_ASSERT(map != MAP_FAILED);
	memset(map, 2, huge);
	pin_accepted(&f, map, huge, "memfd MFD_HUGETLB");
	munmap(map, huge);
	close(memfd);
}

/*
 * The struct in read-only memory, wholly or in part: the driver makes sure
 * it can write the struct back before it pins, so the call fails with
 * -EFAULT and leaves no buffer behind that the caller could not know.
 */
static void pin_struct_readonly(void)
{
	struct fixture f = fx_make();
	void *ro = page_with(&f.pin, sizeof(f.pin), PROT_READ);
	void *none = page_with(&f.pin, sizeof(f.pin), PROT_NONE);
	struct hd_stats before, after;
	long long pins = hd_foll_pins();
	char *two = mmap(NULL, 2 * f.pg, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const size_t at_handle = offsetof(struct drm_haccel_pin, handle);

	KTAP_ASSERT(two != MAP_FAILED);
	hd_stats(f.fd, &before);
	KTAP_EXPECT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_PIN, ro), -EFAULT);
	KTAP_EXPECT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_PIN, none), -EFAULT);
	/* Across a page boundary: the inputs read-only, the handle writable... */
	memcpy(two + f.pg - at_handle, &f.pin, sizeof(f.pin));
	KTAP_ASSERT_EQ(mprotect(two, f.pg, PROT_READ), 0);
	KTAP_EXPECT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_PIN, two + f.pg - at_handle), -EFAULT);
	/* ...and the other way round. */
	KTAP_ASSERT_EQ(mprotect(two, 2 * f.pg, PROT_READ | PROT_WRITE), 0);
	memcpy(two + f.pg - 8, &f.pin, sizeof(f.pin));
	KTAP_ASSERT_EQ(mprotect(two + f.pg, f.pg, PROT_READ), 0);
	KTAP_EXPECT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_PIN, two + f.pg - 8), -EFAULT);
	hd_stats(f.fd, &after);
	KTAP_EXPECT_EQ(after.s.client_bos, before.s.client_bos);
	KTAP_EXPECT_EQ(after.s.node_total, before.s.node_total);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	/* The same struct, writable again, pins. */
	KTAP_ASSERT_EQ(mprotect(ro, f.pg, PROT_READ | PROT_WRITE), 0);
	KTAP_EXPECT_EQ(pin_try(f.fd, *(struct drm_haccel_pin *)ro), 0);
}

/*
 * A PIN struct longer than the driver's (newer userspace: a zero tail) is
 * copied back whole, tail included, by the DRM core: a tail on a read-only
 * page fails the call before anything is pinned, though every byte the
 * driver knows is writable.
 */
static void pin_long_struct_tail_readonly(void)
{
	struct fixture f = fx_make();
	struct hd_stats before, after;
	long long pins = hd_foll_pins();
	char *two = mmap(NULL, 2 * f.pg, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *s;

	KTAP_ASSERT(two != MAP_FAILED);
	memset(two, 0, 2 * f.pg);
	for (unsigned int extra = 8; extra <= 64; extra *= 2) {
		unsigned long cmd = hd_cmd(DRM_HACCEL_PIN, _IOC_READ | _IOC_WRITE,
					   (unsigned int)sizeof(f.pin) + extra);

		/* The known 32 bytes end the writable page, the tail is on the next. */
		KTAP_ASSERT_EQ(mprotect(two + f.pg, f.pg, PROT_READ | PROT_WRITE), 0);
		memset(two, 0, 2 * f.pg);
		s = two + f.pg - sizeof(f.pin);
		memcpy(s, &f.pin, sizeof(f.pin));
		KTAP_ASSERT_EQ(mprotect(two + f.pg, f.pg, PROT_READ), 0);
		hd_stats(f.fd, &before);
		KTAP_EXPECT_EQ(hd_ioctl(f.fd, cmd, s), -EFAULT);
		hd_stats(f.fd, &after);
		KTAP_EXPECT_EQ(after.s.client_bos, before.s.client_bos);
		KTAP_EXPECT_EQ(after.s.node_total, before.s.node_total);
		if (pins >= 0)
			KTAP_EXPECT_EQ(hd_foll_pins(), pins);
		/* The tail writable: the same call pins and writes the handle. */
		KTAP_ASSERT_EQ(mprotect(two + f.pg, f.pg, PROT_READ | PROT_WRITE), 0);
		KTAP_EXPECT_EQ(hd_ioctl(f.fd, cmd, s), 0);
		KTAP_EXPECT(((struct drm_haccel_pin *)s)->handle != 0);
		KTAP_EXPECT_EQ(hd_close_handle(f.fd, ((struct drm_haccel_pin *)s)->handle), 0);
	}
	munmap(two, 2 * f.pg);
}

static void pin_bad_node(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;
	uint32_t n = (uint32_t)hd_param(f.fd, HACCEL_PARAM_NUM_NODES);
	const uint32_t bad[] = { n, n + 1, 1u << 20, HACCEL_DRM_NODE_ANY - 1 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p.node = bad[i];
		pin_expect(&f, p, -EINVAL);
		p.flags = HACCEL_PIN_STRICT_NODE;
		pin_expect(&f, p, -EINVAL);
		p.flags = 0;
	}
}

static void pin_strict_any_node(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_pin p = f.pin;

	p.node = HACCEL_DRM_NODE_ANY;
	p.flags = HACCEL_PIN_STRICT_NODE;
	pin_expect(&f, p, -EINVAL);
}

static void pin_bad_pointer(void)
{
	int fd = hd_open();

	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_PIN, NULL), -EFAULT);
}

/* --- BO_INFO -------------------------------------------------------------- */

static void bo_info_valid(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);
	struct drm_haccel_bo_info bi;
	uint64_t pages[HD_MAX_NODES] = { 0 }, sum = 0;

	KTAP_ASSERT_EQ(hd_bo_info(f.fd, h, &bi, pages, HD_MAX_NODES), 0);
	KTAP_EXPECT_EQ(bi.size, f.pg);
	KTAP_EXPECT_EQ(bi.addr, (uintptr_t)f.mem);
	KTAP_EXPECT_EQ(bi.num_nodes, hd_param(f.fd, HACCEL_PARAM_NUM_NODES));
	for (unsigned int i = 0; i < bi.num_nodes; i++)
		sum += pages[i];
	KTAP_EXPECT_EQ(sum, 1);
	/* A zero-length query only sizes the array. */
	KTAP_ASSERT_EQ(hd_bo_info(f.fd, h, &bi, NULL, 0), 0);
	KTAP_EXPECT_EQ(bi.num_nodes, hd_param(f.fd, HACCEL_PARAM_NUM_NODES));
}

static void bo_info_unknown_flag(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);

	for (int bit = 0; bit < 32; bit++) {
		struct drm_haccel_bo_info bi = { .handle = h, .flags = 1u << bit };

		KTAP_EXPECT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_BO_INFO, &bi), -EINVAL);
	}
}

static void bo_info_pad_nonzero(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);
	struct drm_haccel_bo_info bi = { .handle = h, .pad = 1 };

	KTAP_EXPECT_EQ(hd_ioctl(f.fd, DRM_IOCTL_HACCEL_BO_INFO, &bi), -EINVAL);
}

static void bo_info_bad_handle(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);
	struct drm_haccel_bo_info bi;

	KTAP_EXPECT_EQ(hd_bo_info(f.fd, 0, &bi, NULL, 0), -ENOENT);
	KTAP_EXPECT_EQ(hd_bo_info(f.fd, h + 1000, &bi, NULL, 0), -ENOENT);
	KTAP_EXPECT_EQ(hd_bo_info(f.fd, 0xffffffffu, &bi, NULL, 0), -ENOENT);
	KTAP_ASSERT_EQ(hd_close_handle(f.fd, h), 0);
	KTAP_EXPECT_EQ(hd_bo_info(f.fd, h, &bi, NULL, 0), -ENOENT);
}

/* A handle of another file means nothing here. */
static void bo_info_other_files_handle(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);
	int fd2 = hd_open();
	struct drm_haccel_bo_info bi;

	KTAP_EXPECT_EQ(hd_bo_info(fd2, h, &bi, NULL, 0), -ENOENT);
	close(fd2);
}

static void bo_info_bad_array(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);
	struct drm_haccel_bo_info bi;
	uint64_t zero[HD_MAX_NODES] = { 0 };

	KTAP_EXPECT_EQ(hd_bo_info(f.fd, h, &bi, (uint64_t *)8, 1), -EFAULT);
	KTAP_EXPECT_EQ(hd_bo_info(f.fd, h, &bi, (uint64_t *)0xffff800000000000ull, 1),
		       -EFAULT);
	KTAP_EXPECT_EQ(hd_bo_info(f.fd, h, &bi, page_with(zero, sizeof(zero), PROT_READ), 1),
		       -EFAULT);
}

/*
 * An ioctl's own struct at a bad address: NULL, a small number, a kernel
 * address, PROT_NONE memory (nothing can be read), and for the ioctls that
 * write back, read-only memory. QUOTA_SET only reads its struct, so
 * read-only memory is fine there.
 */
static void struct_bad_pointer(void *valid, size_t len, unsigned long cmd, int writes_back,
			       int fd)
{
	KTAP_EXPECT_EQ(hd_ioctl(fd, cmd, NULL), -EFAULT);
	KTAP_EXPECT_EQ(hd_ioctl(fd, cmd, (void *)8), -EFAULT);
	KTAP_EXPECT_EQ(hd_ioctl(fd, cmd, (void *)0xffff800000000000ull), -EFAULT);
	KTAP_EXPECT_EQ(hd_ioctl(fd, cmd, page_with(valid, len, PROT_NONE)), -EFAULT);
	KTAP_EXPECT_EQ(hd_ioctl(fd, cmd, page_with(valid, len, PROT_READ)),
		       writes_back ? -EFAULT : 0);
	/* The same struct, in writable memory, works. */
	KTAP_EXPECT_EQ(hd_ioctl(fd, cmd, page_with(valid, len, PROT_READ | PROT_WRITE)), 0);
}

static void bo_info_bad_struct(void)
{
	struct fixture f = fx_make();
	struct drm_haccel_bo_info bi = { .handle = live_handle(&f) };

	struct_bad_pointer(&bi, sizeof(bi), DRM_IOCTL_HACCEL_BO_INFO, 1, f.fd);
}

/* --- STATS ---------------------------------------------------------------- */

static void stats_unknown_flag(void)
{
	int fd = hd_open();

	for (int bit = 0; bit < 32; bit++) {
		struct drm_haccel_stats s = { .flags = 1u << bit };

		KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &s), -EINVAL);
	}
}

static void stats_bad_arrays(void)
{
	int fd = hd_open();
	uint64_t ok[HD_MAX_NODES];
	struct drm_haccel_stats s = { .num_nodes = 1 };

	s.node_bytes = 8;
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &s), -EFAULT);
	s.node_bytes = (uintptr_t)ok;
	s.client_bytes = 0xffff800000000000ull;
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &s), -EFAULT);
	/* Either array may be left out. */
	s.client_bytes = 0;
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &s), 0);
	/* Read-only arrays. */
	s.node_bytes = (uintptr_t)page_with(ok, sizeof(uint64_t), PROT_READ);
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &s), -EFAULT);
	s.node_bytes = 0;
	s.client_bytes = (uintptr_t)page_with(ok, sizeof(uint64_t), PROT_READ);
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &s), -EFAULT);
}

static void stats_bad_struct(void)
{
	int fd = hd_open();
	struct drm_haccel_stats s = { .num_nodes = 0 };

	struct_bad_pointer(&s, sizeof(s), DRM_IOCTL_HACCEL_STATS, 1, fd);
}

/* --- QUOTA_GET / QUOTA_SET ------------------------------------------------ */

static void quota_get_unknown_flag(void)
{
	int fd = hd_open();

	for (int bit = 0; bit < 32; bit++) {
		struct drm_haccel_quota q = { .node = 0, .flags = 1u << bit };

		KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_QUOTA_GET, &q), -EINVAL);
	}
}

static void quota_get_bad_node(void)
{
	int fd = hd_open();
	uint32_t n = (uint32_t)hd_param(fd, HACCEL_PARAM_NUM_NODES);
	struct drm_haccel_quota q;

	KTAP_EXPECT_EQ(hd_quota_get(fd, n, &q), -EINVAL);
	KTAP_EXPECT_EQ(hd_quota_get(fd, HACCEL_DRM_NODE_ANY, &q), -EINVAL);
	KTAP_EXPECT_EQ(hd_quota_get(fd, HACCEL_DRM_NODE_ANY - 1, &q), -EINVAL);
}

static void quota_get_bad_struct(void)
{
	int fd = hd_open();
	struct drm_haccel_quota q = { .node = 0 };

	struct_bad_pointer(&q, sizeof(q), DRM_IOCTL_HACCEL_QUOTA_GET, 1, fd);
}

static void quota_set_bad_struct(void)
{
	int fd = hd_open();
	struct drm_haccel_quota q;

	/* Setting the limits node 0 has: harmless when it works. */
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	struct_bad_pointer(&q, sizeof(q), DRM_IOCTL_HACCEL_QUOTA_SET, 0, fd);
}

/*
 * QUOTA_SET validates before it checks the capability: an unprivileged
 * caller with a bad flag or node gets -EINVAL, with a valid call -EPERM.
 */
static void quota_set_validates_before_eperm(void)
{
	int fd = hd_open(), status;
	uint32_t n = (uint32_t)hd_param(fd, HACCEL_PARAM_NUM_NODES);
	struct drm_haccel_quota before, after;
	pid_t pid;

	hd_need_root();
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &before), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		struct drm_haccel_quota q = { .node = 0, .flags = 1 };
		int ok = 1;

		if (hd_drop_to_nobody())
			_exit(3);
		ok &= hd_ioctl(fd, DRM_IOCTL_HACCEL_QUOTA_SET, &q) == -EINVAL;
		q.flags = 0x80000000u;
		ok &= hd_ioctl(fd, DRM_IOCTL_HACCEL_QUOTA_SET, &q) == -EINVAL;
		ok &= hd_quota_set(fd, n, 0, 0) == -EINVAL;
		ok &= hd_quota_set(fd, HACCEL_DRM_NODE_ANY - 1, 0, 0) == -EINVAL;
		ok &= hd_quota_set(fd, 0, 0, 0) == -EPERM;
		ok &= hd_quota_set(fd, HACCEL_DRM_NODE_ANY, 0, 0) == -EPERM;
		_exit(ok ? 0 : 1);
	}
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &after), 0);
	KTAP_EXPECT_EQ(after.node_limit, before.node_limit);
	KTAP_EXPECT_EQ(after.client_limit, before.client_limit);
}

static void quota_set_unknown_flag(void)
{
	int fd = hd_open();
	struct drm_haccel_quota q0;

	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q0), 0);
	for (int bit = 0; bit < 32; bit++) {
		struct drm_haccel_quota q = q0;

		q.flags = 1u << bit;
		q.node_limit = 0; /* would block every PIN if it were taken */
		KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_QUOTA_SET, &q), -EINVAL);
	}
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q0), 0);
	KTAP_EXPECT(q0.node_limit != 0);
}

static void quota_set_bad_node(void)
{
	int fd = hd_open();
	uint32_t n = (uint32_t)hd_param(fd, HACCEL_PARAM_NUM_NODES);

	KTAP_EXPECT_EQ(hd_quota_set(fd, n, 0, 0), -EINVAL);
	KTAP_EXPECT_EQ(hd_quota_set(fd, HACCEL_DRM_NODE_ANY - 1, 0, 0), -EINVAL);
}

/* --- generic GEM and PRIME calls on haccel handles -------------------------- */

static void gem_close_bad_handle(void)
{
	struct fixture f = fx_make();
	uint32_t h = live_handle(&f);

	KTAP_EXPECT_EQ(hd_close_handle(f.fd, 0), -EINVAL);
	KTAP_EXPECT_EQ(hd_close_handle(f.fd, h + 77), -EINVAL);
	KTAP_EXPECT_EQ(hd_close_handle(f.fd, h), 0);
	KTAP_EXPECT_EQ(hd_close_handle(f.fd, h), -EINVAL);
}

static void prime_export_bad_handle(void)
{
	int fd = hd_open();

	KTAP_EXPECT_EQ(hd_export(fd, 12345, 0), -ENOENT);
}

/*
 * The primary node (/dev/dri/cardN, group video on Debian) serves the same
 * ioctls as the render node: every one is DRM_RENDER_ALLOW and none needs
 * DRM_AUTH or master. Its file is a client of its own.
 */
static void primary_node_serves_ioctls(void)
{
	int fd = hd_open(), card = hd_try_open_card(), dmabuf;
	size_t pg = hd_page();
	char *mem = hd_alloc(pg, -1);
	struct drm_haccel_bo_info bi;
	struct drm_haccel_quota q;
	struct hd_stats st;
	uint32_t h, h2 = 0;

	if (card < 0)
		hd_missing("no haccel primary node /dev/dri/cardN: %s", strerror(errno));
	KTAP_EXPECT_EQ(hd_param(card, HACCEL_PARAM_UAPI_VERSION), HACCEL_UAPI_VERSION);
	KTAP_ASSERT_EQ(hd_pin(card, mem, pg, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_bo_info(card, h, &bi, NULL, 0), 0);
	KTAP_EXPECT_EQ(bi.size, pg);
	hd_stats(card, &st);
	KTAP_EXPECT_EQ(st.s.client_total, pg);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.client_total, 0);
	KTAP_EXPECT_EQ(hd_quota_get(card, 0, &q), 0);
	KTAP_EXPECT_EQ(hd_quota_set(card, 0, q.node_limit, q.client_limit), 0);
	dmabuf = hd_export(card, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	KTAP_EXPECT_EQ(hd_import(fd, dmabuf, &h2), 0);
	close(dmabuf);
	KTAP_EXPECT_EQ(hd_close_handle(card, h), 0);
	close(card);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h2), 0);
}

/*
 * The primary node's other way to share (docs/driver.md, security model):
 * an authenticated file there (its master, the first opener, or root's)
 * can publish a buffer under a global name with GEM_FLINK, and any
 * authenticated file opens it by that name with GEM_OPEN, a handle to the
 * same buffer (without its address). Render-node files can do neither.
 */
static void primary_node_flink_open(void)
{
	int fd = hd_open(), card = hd_try_open_card(), card2;
	size_t pg = hd_page();
	char *mem = hd_alloc(pg, -1);
	struct drm_gem_flink fl;
	struct drm_gem_open op;
	struct drm_haccel_bo_info bi;
	uint64_t base = hd_node_total(fd);
	uint32_t h, hr;

	if (card < 0)
		hd_missing("no haccel primary node /dev/dri/cardN: %s", strerror(errno));
	hd_need_root();
	card2 = hd_try_open_card();
	KTAP_ASSERT(card2 >= 0);
	KTAP_ASSERT_EQ(hd_pin(card, mem, pg, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	memset(&fl, 0, sizeof(fl));
	fl.handle = h;
	KTAP_ASSERT_EQ(hd_ioctl(card, DRM_IOCTL_GEM_FLINK, &fl), 0);
	KTAP_EXPECT(fl.name != 0);
	memset(&op, 0, sizeof(op));
	op.name = fl.name;
	KTAP_ASSERT_EQ(hd_ioctl(card2, DRM_IOCTL_GEM_OPEN, &op), 0);
	KTAP_EXPECT_EQ(op.size, pg);
	KTAP_EXPECT_EQ(hd_bo_info(card2, op.handle, &bi, NULL, 0), 0);
	KTAP_EXPECT_EQ(bi.size, pg);
	KTAP_EXPECT_EQ(bi.addr, 0);
	/* The render node refuses both. */
	KTAP_ASSERT_EQ(hd_pin(fd, mem, pg, HACCEL_DRM_NODE_ANY, 0, &hr), 0);
	memset(&fl, 0, sizeof(fl));
	fl.handle = hr;
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_GEM_FLINK, &fl), -EACCES);
	KTAP_EXPECT_EQ(hd_ioctl(fd, DRM_IOCTL_GEM_OPEN, &op), -EACCES);
	KTAP_EXPECT_EQ(hd_close_handle(fd, hr), 0);
	KTAP_EXPECT_EQ(hd_close_handle(card2, op.handle), 0);
	KTAP_EXPECT_EQ(hd_close_handle(card, h), 0);
	close(card2);
	close(card);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
}

static void prime_import_foreign_fd(void)
{
	int fd = hd_open();
	int memfd = (int)syscall(SYS_memfd_create, "not-a-dmabuf", 0);
	uint32_t h;

	KTAP_ASSERT(memfd >= 0);
	KTAP_EXPECT(hd_import(fd, memfd, &h) < 0);
	KTAP_EXPECT_EQ(hd_import(fd, -1, &h), -EBADF);
	close(memfd);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(param_valid),
	KTAP_CASE(param_unknown_flag),
	KTAP_CASE(param_unknown_param),
	KTAP_CASE(param_bad_pointer),
	KTAP_CASE(struct_exact_size),
	KTAP_CASE(struct_smaller),
	KTAP_CASE(struct_larger_zero_tail),
	KTAP_CASE(struct_larger_nonzero_tail),
	KTAP_CASE(struct_wrong_direction),
	KTAP_CASE(ioctl_beyond_table),
	KTAP_CASE(pin_valid),
	KTAP_CASE(pin_unknown_flag),
	KTAP_CASE(pin_pad_nonzero),
	KTAP_CASE(pin_zero_size),
	KTAP_CASE(pin_size_overflow),
	KTAP_CASE(pin_size_over_max),
	KTAP_CASE(pin_unaligned_addr),
	KTAP_CASE(pin_unaligned_size),
	KTAP_CASE(pin_unmapped),
	KTAP_CASE(pin_partly_unmapped),
	KTAP_CASE(pin_kernel_address),
	KTAP_CASE(pin_readonly_mapping),
	KTAP_CASE(pin_pfnmap_mapping),
	KTAP_CASE(pin_file_shared_refused),
	KTAP_CASE(pin_file_private_refused),
	KTAP_CASE(pin_shmem_accepted),
	KTAP_CASE(pin_hugetlb_accepted),
	KTAP_CASE(pin_struct_readonly),
	KTAP_CASE(pin_long_struct_tail_readonly),
	KTAP_CASE(pin_bad_node),
	KTAP_CASE(pin_strict_any_node),
	KTAP_CASE(pin_bad_pointer),
	KTAP_CASE(bo_info_valid),
	KTAP_CASE(bo_info_unknown_flag),
	KTAP_CASE(bo_info_pad_nonzero),
	KTAP_CASE(bo_info_bad_handle),
	KTAP_CASE(bo_info_other_files_handle),
	KTAP_CASE(bo_info_bad_array),
	KTAP_CASE(bo_info_bad_struct),
	KTAP_CASE(stats_unknown_flag),
	KTAP_CASE(stats_bad_arrays),
	KTAP_CASE(stats_bad_struct),
	KTAP_CASE(quota_get_unknown_flag),
	KTAP_CASE(quota_get_bad_node),
	KTAP_CASE(quota_get_bad_struct),
	KTAP_CASE(quota_set_bad_struct),
	KTAP_CASE(quota_set_validates_before_eperm),
	KTAP_CASE(quota_set_unknown_flag),
	KTAP_CASE(quota_set_bad_node),
	KTAP_CASE(gem_close_bad_handle),
	KTAP_CASE(prime_export_bad_handle),
	KTAP_CASE(prime_import_foreign_fd),
	KTAP_CASE(primary_node_serves_ioctls),
	KTAP_CASE(primary_node_flink_open),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
