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

/*
 * The library tests (tests/driver-lib-*.c) include haccel.h first, whose
 * HACCEL_NODE_ANY is the int32_t -1; the uapi's is the __u32 0xffffffff,
 * the same node in each type: here the uapi's is the one defined.
 */
#ifdef HACCEL_H
#undef HACCEL_NODE_ANY
#endif
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

/* Lines of the debugfs client list for pid; -1 when it cannot be read. */
static inline int hd_debugfs_clients_of(pid_t pid)
{
	FILE *f = fopen("/sys/kernel/debug/haccel/clients", "r");
	char line[512];
	int n = 0, p;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%d", &p) == 1 && p == pid)
			n++;
	fclose(f);
	return n;
}

#ifdef HACCEL_H
/* --- for the library tests: a context whose log is kept ------------------ */

#define HL_LOG_LINES 64

static char hl_log[HL_LOG_LINES][1024];
static int hl_log_level[HL_LOG_LINES];
static unsigned int hl_log_n;

static inline void hl_log_fn(void *user, int level, const char *msg)
{
	(void)user;
	if (hl_log_n < HL_LOG_LINES) {
		snprintf(hl_log[hl_log_n], sizeof(hl_log[0]), "%s", msg);
		hl_log_level[hl_log_n++] = level;
	}
}

/* A context logging at info level into hl_log ($HACCEL_* is read now). */
static inline struct haccel_ctx *hl_ctx(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	haccel_open_params_init(&p);
	p.log_fn = hl_log_fn;
	p.log_level = HACCEL_LOG_INFO;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	return ctx;
}

/* Log lines so far that contain needle (at level, or any level if -1). */
static inline unsigned int hl_lines(const char *needle, int level)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < hl_log_n; i++)
		if (strstr(hl_log[i], needle) && (level < 0 || hl_log_level[i] == level))
			n++;
	return n;
}

static inline void hl_log_dump(void)
{
	for (unsigned int i = 0; i < hl_log_n; i++)
		ktap_diag("log %d: %s", hl_log_level[i], hl_log[i]);
}

static inline const char *hl_err(struct haccel_ctx *ctx)
{
	static char buf[1024];

	haccel_last_error(ctx, buf, sizeof(buf));
	return buf;
}

#define HL_EXPECT_ERR(ctx, needle)                                            \
	do {                                                                  \
		const char *e_ = hl_err(ctx);                                 \
		if (!strstr(e_, needle))                                      \
			ktap_fail_at(__FILE__, __LINE__,                      \
				     "last error lacks \"%s\": %s", needle, e_); \
	} while (0)

/* Allocate through the library; returns the status. */
static inline int hl_alloc(struct haccel_ctx *ctx, uint64_t bytes, int node,
			   uint32_t flags, struct haccel_hostmem **m)
{
	struct haccel_hostmem_params p;

	haccel_hostmem_params_init(&p);
	p.bytes = bytes;
	p.node = node;
	p.flags = flags;
	*m = NULL;
	return haccel_hostmem_alloc(ctx, &p, m);
}

static inline struct haccel_hostmem_info hl_info(const struct haccel_hostmem *m)
{
	struct haccel_hostmem_info i;

	KTAP_ASSERT_EQ(haccel_hostmem_info(m, &i), 0);
	return i;
}

static inline struct haccel_hostmem_provider_stats hl_pstats(struct haccel_ctx *ctx)
{
	struct haccel_hostmem_provider_stats s = { .size = sizeof(s) };

	KTAP_ASSERT_EQ(haccel_hostmem_provider_stats(ctx, &s), 0);
	return s;
}

/* VmLck of this process in bytes: what mlock() holds. */
static inline unsigned long long hl_vmlck(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	KTAP_ASSERT(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmLck:", 6))
			kb = strtoull(line + 6, NULL, 10);
	fclose(f);
	return kb * 1024;
}
#endif /* HACCEL_H */

#endif /* HACCEL_TESTS_DRIVER_UTIL_H */
