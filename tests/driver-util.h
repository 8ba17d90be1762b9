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

/* The library tests (tests/driver-lib-*.c) include haccel.h too: its
 * HACCEL_NODE_ANY (int32_t -1) and the uapi's HACCEL_DRM_NODE_ANY (__u32
 * 0xffffffff) name the same "any node" in each API's type. */
#include "haccel_drm.h"
#include "ktap.h"

#define HD_MAX_NODES 64

/* In the test VM (tests/vm/init.sh sets HACCEL_VM_GUEST). */
static inline int hd_in_vm(void)
{
	return getenv("HACCEL_VM_GUEST") != NULL;
}

/*
 * A precondition of the case is missing: on a host, skip it with the
 * reason; in the test VM, whose runner provides every precondition (two
 * NUMA nodes, the data and scratch disks, debugfs, root, HACCEL_MODULE, a
 * foreign dma-buf exporter), fail it, so that no required case can
 * silently become a skip there.
 */
#define hd_missing(...)                                                       \
	do {                                                                  \
		if (hd_in_vm()) {                                             \
			ktap_fail_at(__FILE__, __LINE__, "in the VM: " __VA_ARGS__); \
			ktap_end();                                           \
		}                                                             \
		ktap_skip(__VA_ARGS__);                                       \
	} while (0)

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

/* Open the first of fmt's nodes (minors first..last-1) that haccel drives,
 * or -1 if there is none. */
static inline int hd_try_open_node(const char *fmt, int first, int last)
{
	for (int minor = first; minor < last; minor++) {
		char path[64], name[32] = "";
		struct drm_version v;
		int fd;

		snprintf(path, sizeof(path), fmt, minor);
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

/* Open the haccel render node, or -1 if there is none. */
static inline int hd_try_open(void)
{
	return hd_try_open_node("/dev/dri/renderD%d", 128, 192);
}

/* Open the haccel primary node (/dev/dri/cardN), or -1 if there is none. */
static inline int hd_try_open_card(void)
{
	return hd_try_open_node("/dev/dri/card%d", 0, 64);
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
			s->q[i].node = HACCEL_DRM_NODE_ANY; /* offline */
}

static inline void hd_quotas_restore(int fd, const struct hd_quotas *s)
{
	for (unsigned int i = 0; i < s->n; i++)
		if (s->q[i].node != HACCEL_DRM_NODE_ANY)
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
		hd_missing("needs %u NUMA nodes, this machine has %u", n,
			   hd_online_nodes());
}

static inline void hd_need_root(void)
{
	if (geteuid() != 0)
		hd_missing("needs root (to drop to an unprivileged user)");
}

/*
 * Drop to uid and gid 65534 (nobody) for good; files already open stay
 * open, so only the caller's own credentials change. 0 or -errno.
 */
static inline int hd_drop_to_nobody(void)
{
	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return -errno;
	return 0;
}

/* A small xorshift64 generator for forked children and threads, which
 * must not share the case's ktap_rand() stream. */
static inline uint64_t hd_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Pages present on node, as the kernel counts node_present_pages(): the
 * sum of the "present" lines of the node's zones in /proc/zoneinfo (empty
 * zones print none); 0 if it cannot be read.
 */
static inline uint64_t hd_node_present_pages(unsigned int node)
{
	FILE *f = fopen("/proc/zoneinfo", "r");
	char line[256];
	unsigned int cur = ~0u;
	uint64_t sum = 0, v;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned int n;

		if (sscanf(line, "Node %u,", &n) == 1)
			cur = n;
		else if (cur == node && sscanf(line, " present %llu",
						 (unsigned long long *)&v) == 1)
			sum += v;
	}
	fclose(f);
	return sum;
}

/* A parameter of the loaded module from sysfs, or -1. */
static inline long long hd_module_param(const char *name)
{
	char path[128];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/haccel/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * The limits the driver computes at load from its parameters, node by
 * node, in bytes: (present pages << PAGE_SHIFT) / 100 * percent, with the
 * present pages the kernel counts for the node (node_present_pages());
 * offline nodes get 0.
 */
static inline void hd_expect_limits_from_params(int fd)
{
	long long node_pct = hd_module_param("node_quota_pct");
	long long client_pct = hd_module_param("client_quota_pct");
	unsigned int n = hd_online_nodes();

	KTAP_ASSERT(node_pct >= 0 && client_pct >= 0);
	ktap_diag("node_quota_pct=%lld client_quota_pct=%lld", node_pct, client_pct);
	for (unsigned int i = 0; i < n; i++) {
		uint64_t bytes = hd_node_present_pages(i) * hd_page();
		struct drm_haccel_quota q;

		KTAP_ASSERT(bytes > 0);
		KTAP_ASSERT_EQ(hd_quota_get(fd, i, &q), 0);
		ktap_diag("node %u: %llu bytes present, limits %llu and %llu", i,
			  (unsigned long long)bytes, (unsigned long long)q.node_limit,
			  (unsigned long long)q.client_limit);
		KTAP_EXPECT_EQ(q.node_limit, bytes / 100 * (uint64_t)node_pct);
		KTAP_EXPECT_EQ(q.client_limit, bytes / 100 * (uint64_t)client_pct);
	}
}

/*
 * Live slab objects allocated at haccel sites, by the allocator's own
 * traces (<debugfs>/slab/CACHE/alloc_traces, kept for caches with
 * SLAB_STORE_USER: the VM boots with slub_debug=FZPU): the sum of the
 * counts of the records whose site is a haccel function (hac_*) other
 * than the device's own arrays (hac_quota_init) and whose stack does not
 * run through a module's init; -1 when there are no traces to read. Each
 * record is shown when show is set. A record is "COUNT SITE [MODULE] ..."
 * and its stack, one frame a line.
 *
 * Only a difference of two counts means something: init code is freed
 * after its module's init, and haccel's text may since sit where another
 * module's was, so a record of that module's init can carry a haccel name;
 * its do_init_module frame gives it away, unless the stack could not be
 * saved. Such records stay as they are across a workload.
 */
static inline long long hd_live_objects(int show)
{
	DIR *d = opendir("/sys/kernel/debug/slab");
	struct dirent *e;
	long long live = 0;
	int traced = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[512], line[512], head[512] = "", site[128] = "";
		long long n = 0, count;
		int in_init = 0, eof = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/debug/slab/%s/alloc_traces",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		traced = 1;
		while (!eof) {
			char s2[128];

			eof = !fgets(line, sizeof(line), f);
			if (!eof) {
				line[strcspn(line, "\n")] = 0;
				if (sscanf(line, " %lld %127s", &count, s2) != 2) {
					in_init |= strstr(line, "do_init_module") != NULL;
					continue;
				}
			}
			/* A record ends: count it. */
			if (n && !in_init && !strncmp(site, "hac_", 4) &&
			    strncmp(site, "hac_quota_init+", 15)) {
				if (show)
					ktap_diag("alive in %s: %s", e->d_name, head);
				live += n;
			}
			if (!eof) {
				n = count;
				snprintf(site, sizeof(site), "%s", s2);
				snprintf(head, sizeof(head), "%s", line);
				in_init = 0;
			}
		}
		fclose(f);
	}
	closedir(d);
	return traced ? live : -1;
}

/* The path of haccel.ko to load (the VM runner sets HACCEL_MODULE). */
static inline const char *hd_module_path(void)
{
	const char *p = getenv("HACCEL_MODULE");

	if (!p)
		hd_missing("HACCEL_MODULE (the path of haccel.ko) is not set: runs in the VM");
	return p;
}

/* Unload haccel.ko without waiting: 0 or -errno (-EBUSY while in use). */
static inline int hd_module_unload(void)
{
	return syscall(SYS_delete_module, "haccel", O_NONBLOCK) ? -errno : 0;
}

/* Load haccel.ko from path with a parameter string, as insmod does: 0 or -errno. */
static inline int hd_module_load(const char *path, const char *params)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return r;
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
