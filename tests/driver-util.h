/* SPDX-License-Identifier: MIT */
/* Helpers shared by the haccel.ko tests (run in the VM): the render node, ioctl wrappers, node-bound memory, quotas. */
#ifndef HACCEL_TESTS_DRIVER_UTIL_H
#define HACCEL_TESTS_DRIVER_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "haccel_drm.h"
#include "ktap.h"

#define HD_MAX_NODES 64

/* An ioctl that returns 0 or -errno, retried on EINTR/EAGAIN like drmIoctl. */
static inline int hd_ioctl(int fd, unsigned long req, void *arg)
{
	int r;

	do {
		r = ioctl(fd, req, arg);
	} while (r == -1 && (errno == EINTR || errno == EAGAIN));
	return r == -1 ? -errno : 0;
}

/* The same ioctl number with another struct size or direction. */
static inline unsigned long hd_cmd(unsigned int nr, unsigned int dir,
				   unsigned int size)
{
	return _IOC(dir, DRM_IOCTL_BASE, DRM_COMMAND_BASE + nr, size);
}

/* Open the haccel render node, or -1 if there is none. */
static inline int hd_try_open(void)
{
	for (int minor = 128; minor < 192; minor++) {
		char path[64], name[32] = "";
		struct drm_version v;
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/renderD%d", minor);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(&v, 0, sizeof(v));
		v.name = name;
		v.name_len = sizeof(name) - 1;
		if (hd_ioctl(fd, DRM_IOCTL_VERSION, &v) == 0 &&
		    !strcmp(name, HACCEL_DRIVER_NAME))
			return fd;
		close(fd);
	}
	return -1;
}

/*
 * Open the haccel render node or skip the case; in the test VM, where the
 * module is meant to be loaded (HACCEL_VM_GUEST set), fail it instead.
 */
static inline int hd_open(void)
{
	int fd = hd_try_open();

	if (fd < 0 && getenv("HACCEL_VM_GUEST")) {
		ktap_fail_at(__FILE__, __LINE__, "no haccel render node: %s",
			     strerror(errno));
		ktap_end();
	}
	if (fd < 0)
		ktap_skip("haccel.ko is not loaded (no haccel render node)");
	return fd;
}

static inline uint64_t hd_param(int fd, uint32_t param)
{
	struct drm_haccel_param p = { .param = param };

	KTAP_ASSERT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_GET_PARAM, &p), 0);
	return p.value;
}

static inline unsigned int hd_num_nodes(int fd)
{
	uint64_t n = hd_param(fd, HACCEL_PARAM_NUM_NODES);

	KTAP_ASSERT(n >= 1 && n <= HD_MAX_NODES);
	return (unsigned int)n;
}

static inline size_t hd_page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static inline int hd_pin(int fd, const void *addr, uint64_t size, uint32_t node,
			 uint32_t flags, uint32_t *handle)
{
	struct drm_haccel_pin p = {
		.addr = (uintptr_t)addr, .size = size, .node = node, .flags = flags,
	};
	int r = hd_ioctl(fd, DRM_IOCTL_HACCEL_PIN, &p);

	if (handle)
		*handle = r ? 0 : p.handle;
	return r;
}

static inline int hd_close_handle(int fd, uint32_t handle)
{
	struct drm_gem_close c = { .handle = handle };

	return hd_ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

/* Export a handle as a dma-buf fd (read-write unless ro), or -errno. */
static inline int hd_export(int fd, uint32_t handle, int ro)
{
	struct drm_prime_handle p = {
		.handle = handle, .flags = DRM_CLOEXEC | (ro ? 0 : DRM_RDWR),
	};
	int r = hd_ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p);

	return r ? r : p.fd;
}

static inline int hd_import(int fd, int dmabuf, uint32_t *handle)
{
	struct drm_prime_handle p = { .fd = dmabuf };
	int r = hd_ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p);

	if (r == 0)
		*handle = p.handle;
	return r;
}

struct hd_stats {
	struct drm_haccel_stats s;
	uint64_t node[HD_MAX_NODES];
	uint64_t client[HD_MAX_NODES];
};

static inline void hd_stats(int fd, struct hd_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->s.node_bytes = (uintptr_t)st->node;
	st->s.client_bytes = (uintptr_t)st->client;
	st->s.num_nodes = HD_MAX_NODES;
	KTAP_ASSERT_EQ(hd_ioctl(fd, DRM_IOCTL_HACCEL_STATS, &st->s), 0);
}

/* Node-wide pinned bytes, all nodes. */
static inline uint64_t hd_node_total(int fd)
{
	struct hd_stats st;

	hd_stats(fd, &st);
	return st.s.node_total;
}

/* Node-wide pinned bytes on one node. */
static inline uint64_t hd_node_used(int fd, unsigned int node)
{
	struct hd_stats st;

	hd_stats(fd, &st);
	return st.node[node];
}

static inline int hd_bo_info(int fd, uint32_t handle, struct drm_haccel_bo_info *bi,
			     uint64_t *node_pages, uint32_t n)
{
	memset(bi, 0, sizeof(*bi));
	bi->handle = handle;
	bi->node_pages = (uintptr_t)node_pages;
	bi->num_nodes = n;
	return hd_ioctl(fd, DRM_IOCTL_HACCEL_BO_INFO, bi);
}

static inline int hd_quota_get(int fd, uint32_t node, struct drm_haccel_quota *q)
{
	memset(q, 0, sizeof(*q));
	q->node = node;
	return hd_ioctl(fd, DRM_IOCTL_HACCEL_QUOTA_GET, q);
}

static inline int hd_quota_set(int fd, uint32_t node, uint64_t node_limit,
			       uint64_t client_limit)
{
	struct drm_haccel_quota q = {
		.node = node, .node_limit = node_limit, .client_limit = client_limit,
	};

	return hd_ioctl(fd, DRM_IOCTL_HACCEL_QUOTA_SET, &q);
}

/* Quotas of every node, saved to be restored by a case that changes them. */
struct hd_quotas {
	unsigned int n;
	struct drm_haccel_quota q[HD_MAX_NODES];
};

static inline void hd_quotas_save(int fd, struct hd_quotas *s)
{
	s->n = hd_num_nodes(fd);
	for (unsigned int i = 0; i < s->n; i++)
		if (hd_quota_get(fd, i, &s->q[i]))
			s->q[i].node = HACCEL_NODE_ANY; /* offline */
}

static inline void hd_quotas_restore(int fd, const struct hd_quotas *s)
{
	for (unsigned int i = 0; i < s->n; i++)
		if (s->q[i].node != HACCEL_NODE_ANY)
			KTAP_EXPECT_EQ(hd_quota_set(fd, i, s->q[i].node_limit,
						    s->q[i].client_limit), 0);
}

/* Anonymous memory bound to node (or anywhere for -1), faulted in. */
static inline void *hd_alloc(size_t size, int node)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	KTAP_ASSERT(p != MAP_FAILED);
	if (node >= 0) {
		unsigned long mask = 1ul << node;

		/* MPOL_BIND (2) before the first touch places every page. */
		KTAP_ASSERT_EQ(syscall(SYS_mbind, p, size, 2, &mask,
				       sizeof(mask) * 8 + 1, 0), 0);
	}
	memset(p, 0x5a, size);
	return p;
}

/* Pages of [p, p + size) on node, by move_pages(2). */
static inline size_t hd_pages_on(void *p, size_t size, int node)
{
	size_t n = size / hd_page(), on = 0;
	void **pages = calloc(n, sizeof(*pages));
	int *status = calloc(n, sizeof(*status));

	KTAP_ASSERT(pages && status);
	for (size_t i = 0; i < n; i++)
		pages[i] = (char *)p + i * hd_page();
	KTAP_ASSERT_EQ(syscall(SYS_move_pages, 0, n, pages, NULL, status, 0), 0);
	for (size_t i = 0; i < n; i++)
		on += status[i] == node;
	free(pages);
	free(status);
	return on;
}

/*
 * Pages pinned with FOLL_PIN system-wide (acquired - released in
 * /proc/vmstat), after folding the per-CPU counters (vm.stat_refresh, root
 * only); -1 if the kernel does not say. The kernel's own count, so it shows
 * real unpinning, not only the driver's bookkeeping.
 */
static inline long long hd_foll_pins(void)
{
	long long acquired = -1, released = -1, v;
	char name[64];
	FILE *f = fopen("/proc/sys/vm/stat_refresh", "w");

	if (f) {
		fputs("1", f);
		fclose(f);
	}
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			acquired = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			released = v;
	}
	fclose(f);
	return acquired < 0 || released < 0 ? -1 : acquired - released;
}

/* Online nodes, as a count, from sysfs. */
static inline unsigned int hd_online_nodes(void)
{
	unsigned int n = 0;
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;

	if (!d)
		return 1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "node", 4) && e->d_name[4] >= '0' &&
		    e->d_name[4] <= '9')
			n++;
	closedir(d);
	return n ? n : 1;
}

static inline void hd_need_nodes(unsigned int n)
{
	if (hd_online_nodes() < n)
		ktap_skip("needs %u NUMA nodes, this machine has %u", n,
			  hd_online_nodes());
}

/* Pass an fd over a unix socket. */
static inline int hd_send_fd(int sock, int fd)
{
	char byte = 'f', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(cbuf, 0, sizeof(cbuf));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

static inline int hd_recv_fd(int sock)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

#endif /* HACCEL_TESTS_DRIVER_UTIL_H */
