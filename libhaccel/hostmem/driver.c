// SPDX-License-Identifier: MIT
/*
 * The haccel.ko provider: pinned host memory through the driver, so that
 * node-wide quotas bound what every process on the node pins together.
 *
 * Userspace still owns the memory: hostmem.c maps it (anonymous or
 * hugetlb), binds it to the node and faults it in, exactly as for mlock;
 * only the last step differs. Instead of mlock() the pages are handed to
 * DRM_IOCTL_HACCEL_PIN, which pins them long-term behind a GEM handle and
 * charges them to the nodes they are on. The same pages are then
 * registered with io_uring and CUDA as before: nothing ever maps driver
 * memory, which CUDA could not register (VM_PFNMAP) and io_uring could not
 * use as fixed buffers.
 *
 * Finding the driver, once per context, at the first allocation (or the
 * first haccel_driver_info() call):
 *  1. sysfs ($HACCEL_SYSFS_ROOT) says whether the module is loaded
 *     (module/haccel) and which render node its device has
 *     (class/drm/renderD* whose device's driver is "haccel"). When the
 *     module is not loaded nothing is opened: the GPUs' own render nodes
 *     are left alone.
 *  2. The render nodes are found through libdrm (drmGetDevices2(), then
 *     /dev/dri as libdrm may skip a platform device it cannot describe),
 *     that render node first, and the one whose DRM_IOCTL_VERSION name is
 *     "haccel" (drmGetVersion()) is kept open: it is this context's client
 *     file, to which every pin is charged.
 *  3. The version handshake of uapi/haccel_drm.h: the same major, and the
 *     driver's oldest served userspace version at most ours. A refusal
 *     names both versions; the context then uses mlock.
 *
 * Logged once per context (each context has its own log sink): the
 * provider chosen, at info level; a driver that is loaded but cannot be
 * used (no permission, incompatible), at warn level, since an administrator
 * installed it to be used.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "core/log.h"
#include "driver.h"
#include "hostmem.h"

#ifdef HAVE_LIBDRM
#include <xf86drm.h>

/* Its HACCEL_DRM_NODE_ANY (a __u32) is haccel.h's HACCEL_NODE_ANY (-1). */
#include "uapi/haccel_drm.h"
#endif

/* The ABI this library speaks (uapi/haccel_drm.h; the same numbers
 * without libdrm, where the header cannot be included). */
#define LIB_UAPI_MAJOR 1
#define LIB_UAPI_MINOR 0
#define ENCODE(maj, min) ((((uint64_t)(maj) & 0xffff) << 16) | ((uint64_t)(min) & 0xffff))
#define MAJOR(v) ((unsigned int)(((v) >> 16) & 0xffff))
#define MINOR(v) ((unsigned int)((v) & 0xffff))

#ifdef HAVE_LIBDRM
_Static_assert(HACCEL_UAPI_MAJOR == LIB_UAPI_MAJOR && HACCEL_UAPI_MINOR == LIB_UAPI_MINOR,
	       "LIB_UAPI_* must follow uapi/haccel_drm.h");
_Static_assert(HACCEL_DRIVER_CAP_PIN_STRICT_NODE == HACCEL_CAP_PIN_STRICT_NODE &&
		       HACCEL_DRIVER_CAP_PRIME_EXPORT == HACCEL_CAP_PRIME_EXPORT &&
		       HACCEL_DRIVER_CAP_PRIME_MMAP == HACCEL_CAP_PRIME_MMAP &&
		       HACCEL_DRIVER_CAP_CLIENT_QUOTA == HACCEL_CAP_CLIENT_QUOTA &&
		       HACCEL_DRIVER_UNLIMITED == HACCEL_QUOTA_UNLIMITED,
	       "haccel.h mirrors uapi/haccel_drm.h");
#endif

/* Render nodes are minors 128..191 (DRM_MINOR_RENDER); a few to look at. */
#define MAX_CANDIDATES 64
/* Pages whose node one move_pages() call asks for, on error paths. */
#define QUERY_BATCH 1024

enum mode { MODE_AUTO, MODE_DRIVER, MODE_USER };

struct haccel__driver {
	/* Serialises the probe and the pick; both run once per context. */
	pthread_mutex_t lock;
	/* Written once under lock; read-only after (probed, picked say so). */
	bool probed;
	int status;                       /* of the probe: 0 usable, or -errno */
	struct haccel_driver_info info;
	int fd;                           /* the render node, -1 unless usable */
	bool picked;
	int provider;                     /* enum haccel_hostmem_provider or -errno */
	char provider_why[640];
	/* Under ctx->lock, with the other host memory statistics. */
	struct haccel__provider_counts counts;
};

/* --- the version rule ---------------------------------------------------- */

int haccel__driver_version_check(uint64_t drv, uint64_t drv_min, uint64_t ours,
				 char *why, size_t len)
{
	const char *fix;

	if (drv > 0xffffffffull || drv_min > 0xffffffffull || ours > 0xffffffffull || !drv ||
	    !drv_min) {
		snprintf(why, len,
			 "haccel.ko reports ABI version 0x%llx (serving userspace from 0x%llx), which is no encoded version; this library speaks %u.%u: refused",
			 (unsigned long long)drv, (unsigned long long)drv_min, MAJOR(ours),
			 MINOR(ours));
		return -EPROTO;
	}
	if (MAJOR(drv) == MAJOR(ours) && drv_min <= ours) {
		snprintf(why, len,
			 "haccel.ko speaks ABI %u.%u (serves userspace from %u.%u); this library speaks %u.%u: compatible",
			 MAJOR(drv), MINOR(drv), MAJOR(drv_min), MINOR(drv_min), MAJOR(ours),
			 MINOR(ours));
		return 0;
	}
	/* Whichever side is older is the one to update. */
	fix = MAJOR(drv) < MAJOR(ours) ? "update haccel.ko" : "update libhaccel";
	snprintf(why, len, "haccel.ko speaks ABI %u.%u (serves userspace from %u.%u); this library speaks %u.%u: %s",
		 MAJOR(drv), MINOR(drv), MAJOR(drv_min), MINOR(drv_min), MAJOR(ours),
		 MINOR(ours), fix);
	return -EPROTO;
}

/*
 * The version this library claims: its own, or HACCEL_TEST_UAPI_VERSION
 * ("MAJOR.MINOR"), a test knob that lets the VM tests drive a refusal
 * through the real driver.
 */
static uint64_t lib_version(struct haccel_ctx *ctx)
{
	const char *env = getenv("HACCEL_TEST_UAPI_VERSION");
	unsigned int maj, min;
	char end;

	if (!env || !*env)
		return ENCODE(LIB_UAPI_MAJOR, LIB_UAPI_MINOR);
	if (sscanf(env, "%u.%u%c", &maj, &min, &end) == 2 && maj <= 0xffff && min <= 0xffff)
		return ENCODE(maj, min);
	haccel__warn(ctx, "HACCEL_TEST_UAPI_VERSION=%s is not MAJOR.MINOR; ignored", env);
	return ENCODE(LIB_UAPI_MAJOR, LIB_UAPI_MINOR);
}

/* --- state --------------------------------------------------------------- */

int haccel__driver_ctx_init(struct haccel_ctx *ctx)
{
	struct haccel__driver *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->fd = -1;
	ctx->driver = d;
	return 0;
}

void haccel__driver_ctx_fini(struct haccel_ctx *ctx)
{
	struct haccel__driver *d = ctx->driver;

	if (!d)
		return;
	/* Closing the file releases whatever this context still had pinned. */
	if (d->fd >= 0)
		close(d->fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
	ctx->driver = NULL;
}

struct haccel__provider_counts *haccel__driver_counts(struct haccel_ctx *ctx)
{
	return &ctx->driver->counts;
}

bool haccel__driver_strict_node(struct haccel_ctx *ctx)
{
	return ctx->driver->info.caps & HACCEL_DRIVER_CAP_PIN_STRICT_NODE;
}

/* --- sysfs ----------------------------------------------------------------- */

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * The render node sysfs gives the haccel device ("/dev/dri/renderD128"):
 * the one whose device is the platform device haccel.ko registers, named
 * by its modalias "platform:haccel". (No driver binds to that device, so
 * there is no device/driver link to go by.)
 */
static void sysfs_render_node(struct haccel_ctx *ctx, char *out, size_t len)
{
	char dir[512], path[800], alias[128];
	struct dirent *e;
	DIR *dp;

	out[0] = '\0';
	haccel__sysfs_path(ctx, dir, sizeof(dir), "class/drm");
	dp = opendir(dir);
	if (!dp)
		return;
	while ((e = readdir(dp))) {
		FILE *f;
		bool match = false;

		if (strncmp(e->d_name, "renderD", 7) || strlen(e->d_name) >= 40)
			continue;
		snprintf(path, sizeof(path), "%s/%s/device/modalias", dir, e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(alias, sizeof(alias), f)) {
			alias[strcspn(alias, "\n")] = '\0';
			match = !strcmp(alias, "platform:haccel");
		}
		fclose(f);
		if (match) {
			snprintf(out, len, "/dev/dri/%.40s", e->d_name);
			break;
		}
	}
	closedir(dp);
}

/* --- finding and opening the render node ----------------------------------- */

#ifdef HAVE_LIBDRM
struct candidates {
	unsigned int n;
	char path[MAX_CANDIDATES][64];
};

static void candidate_add(struct candidates *c, const char *path)
{
	for (unsigned int i = 0; i < c->n; i++)
		if (!strcmp(c->path[i], path))
			return;
	if (c->n < MAX_CANDIDATES && strlen(path) < sizeof(c->path[0]))
		snprintf(c->path[c->n++], sizeof(c->path[0]), "%s", path);
}

/* Render nodes libdrm enumerates, then any other in /dev/dri. */
static void candidates_find(struct candidates *c)
{
	drmDevicePtr devs[MAX_CANDIDATES];
	struct dirent *e;
	int n;
	DIR *dp;

	/* The count is of all devices; only MAX_CANDIDATES were filled in. */
	n = drmGetDevices2(0, devs, MAX_CANDIDATES);
	if (n > MAX_CANDIDATES)
		n = MAX_CANDIDATES;
	for (int i = 0; i < n; i++)
		if (devs[i]->available_nodes & (1 << DRM_NODE_RENDER))
			candidate_add(c, devs[i]->nodes[DRM_NODE_RENDER]);
	if (n > 0)
		drmFreeDevices(devs, n);
	dp = opendir("/dev/dri");
	if (!dp)
		return;
	while ((e = readdir(dp))) {
		char path[64];

		if (strncmp(e->d_name, "renderD", 7) || strlen(e->d_name) > 40)
			continue;
		snprintf(path, sizeof(path), "/dev/dri/%s", e->d_name);
		candidate_add(c, path);
	}
	closedir(dp);
}

/* Whether fd is a haccel device: its DRM name. */
static bool is_haccel(int fd)
{
	drmVersionPtr v = drmGetVersion(fd);
	bool yes = v && v->name && !strcmp(v->name, HACCEL_DRIVER_NAME);

	drmFreeVersion(v);
	return yes;
}

static int get_param(int fd, uint32_t param, uint64_t *value)
{
	struct drm_haccel_param p = { .param = param };

	if (drmIoctl(fd, DRM_IOCTL_HACCEL_GET_PARAM, &p))
		return -errno;
	*value = p.value;
	return 0;
}

/*
 * Open the haccel render node: the one sysfs names first, then every other
 * one. Returns the fd, or -1 with the first open error kept (the one of
 * the sysfs node when there is one) for the message.
 */
static int open_node(const char *hint, char *found, size_t len, int *err,
		     char *err_path, size_t err_len, unsigned int *looked)
{
	struct candidates c = { 0 };

	*err = 0;
	if (hint[0])
		candidate_add(&c, hint);
	candidates_find(&c);
	*looked = c.n;
	for (unsigned int i = 0; i < c.n; i++) {
		int fd = open(c.path[i], O_RDWR | O_CLOEXEC);

		if (fd < 0) {
			if (!*err || (hint[0] && !strcmp(c.path[i], hint))) {
				*err = errno;
				snprintf(err_path, err_len, "%s", c.path[i]);
			}
			continue;
		}
		if (is_haccel(fd)) {
			snprintf(found, len, "%s", c.path[i]);
			return fd;
		}
		close(fd);
	}
	return -1;
}

/* Version, then what the driver offers; -EPROTO when it does not answer. */
static int handshake(struct haccel_ctx *ctx, struct haccel__driver *d, int fd)
{
	struct haccel_driver_info *i = &d->info;
	uint64_t ver = 0, min = 0, caps = 0, nodes = 0, page = 0, max = 0;
	int ret;

	ret = get_param(fd, HACCEL_PARAM_UAPI_VERSION, &ver);
	if (!ret)
		ret = get_param(fd, HACCEL_PARAM_UAPI_MIN_VERSION, &min);
	if (ret) {
		snprintf(i->reason, sizeof(i->reason),
			 "haccel.ko at %s does not answer GET_PARAM for its ABI version (%s): not a driver this library knows",
			 i->render_node, strerror(-ret));
		return -EPROTO;
	}
	ret = haccel__driver_version_check(ver, min, i->lib_uapi_version, i->reason,
					   sizeof(i->reason));
	i->uapi_version = ver <= 0xffffffffull ? (uint32_t)ver : 0;
	i->uapi_min_version = min <= 0xffffffffull ? (uint32_t)min : 0;
	if (ret)
		return ret;
	i->compatible = 1;
	/* Every 1.0 driver answers these; a failure is a broken driver. */
	ret = get_param(fd, HACCEL_PARAM_CAPS, &caps);
	if (!ret)
		ret = get_param(fd, HACCEL_PARAM_NUM_NODES, &nodes);
	if (!ret)
		ret = get_param(fd, HACCEL_PARAM_PAGE_SIZE, &page);
	if (!ret)
		ret = get_param(fd, HACCEL_PARAM_MAX_PIN_SIZE, &max);
	if (ret || !nodes || nodes > 1024 || !page || (page & (page - 1)) || max < page) {
		snprintf(i->reason, sizeof(i->reason),
			 "haccel.ko at %s gives no usable limits (GET_PARAM: %s; %llu nodes, page %llu, max pin %llu)",
			 i->render_node, ret ? strerror(-ret) : "answered", (unsigned long long)nodes,
			 (unsigned long long)page, (unsigned long long)max);
		i->compatible = 0;
		return -EPROTO;
	}
	i->caps = caps;
	i->num_nodes = (uint32_t)nodes;
	i->page_size = page;
	i->max_pin_bytes = max;
	haccel__dbg(ctx, "driver: %s", i->reason);
	i->reason[0] = '\0';
	return 0;
}
#endif /* HAVE_LIBDRM */

/* Fill d->info and d->status; under d->lock, once. */
static void probe(struct haccel_ctx *ctx, struct haccel__driver *d)
{
	struct haccel_driver_info *i = &d->info;
	char path[512], hint[64];
	bool sysfs_loaded, sysfs_knows;

	memset(i, 0, sizeof(*i));
	i->size = sizeof(*i);
	i->lib_uapi_version = (uint32_t)lib_version(ctx);
	haccel__sysfs_path(ctx, path, sizeof(path), "module");
	sysfs_knows = is_dir(path);
	haccel__sysfs_path(ctx, path, sizeof(path), "module/haccel");
	sysfs_loaded = is_dir(path);
	sysfs_render_node(ctx, hint, sizeof(hint));
	i->loaded = sysfs_loaded || hint[0];
	snprintf(i->render_node, sizeof(i->render_node), "%s", hint);
	d->probed = true;
	if (!i->loaded && sysfs_knows) {
		snprintf(i->reason, sizeof(i->reason), "haccel.ko is not loaded (no %.400s)", path);
		d->status = -ENODEV;
		return;
	}
#ifndef HAVE_LIBDRM
	snprintf(i->reason, sizeof(i->reason),
		 "%s, but this libhaccel was built without libdrm and cannot use it (rebuild with libdrm-dev installed)",
		 i->loaded ? "haccel.ko is loaded" : "sysfs cannot say whether haccel.ko is loaded");
	d->status = -ENOTSUP;
#else
	{
		char err_path[64] = "";
		unsigned int looked = 0;
		int fd, err;

		fd = open_node(hint, i->render_node, sizeof(i->render_node), &err, err_path,
			       sizeof(err_path), &looked);
		if (fd < 0) {
			const char *who = i->loaded ? "haccel.ko is loaded" :
						      "sysfs cannot say whether haccel.ko is loaded";

			d->status = err == EACCES || err == EPERM ? -EACCES : -ENODEV;
			if (err)
				snprintf(i->reason, sizeof(i->reason),
					 "%s, but %s render node %s cannot be opened (%s)%s", who,
					 hint[0] ? "its" : "the", err_path, strerror(err),
					 d->status == -EACCES ?
						 ": render nodes belong to group render; add the user to it (usermod -aG render USER)" :
						 "");
			else
				snprintf(i->reason, sizeof(i->reason),
					 "%s, but none of the %u render nodes found through libdrm is driven by haccel",
					 who, looked);
			return;
		}
		i->loaded = 1;
		d->status = handshake(ctx, d, fd);
		if (d->status) {
			close(fd);
			return;
		}
		i->usable = 1;
		d->fd = fd;
	}
#endif
}

static void ensure_probed(struct haccel_ctx *ctx, struct haccel__driver *d)
{
	if (!d->probed)
		probe(ctx, d);
}

/* --- the pick ---------------------------------------------------------------- */

static void pick(struct haccel_ctx *ctx, struct haccel__driver *d)
{
	const char *env = getenv("HACCEL_HOSTMEM_PROVIDER");
	const struct haccel_driver_info *i = &d->info;
	enum mode mode = MODE_AUTO;

	d->picked = true;
	d->provider_why[0] = '\0';
	if (env && !strcmp(env, "driver"))
		mode = MODE_DRIVER;
	else if (env && !strcmp(env, "user"))
		mode = MODE_USER;
	else if (env && *env && strcmp(env, "auto"))
		haccel__warn(ctx, "HACCEL_HOSTMEM_PROVIDER=%s not understood (use auto, driver or user); using auto",
			     env);
	if (mode == MODE_USER) {
		d->provider = HACCEL_HOSTMEM_PROVIDER_USER;
		haccel__info(ctx, "hostmem: HACCEL_HOSTMEM_PROVIDER=user: pinning with mlock (RLIMIT_MEMLOCK applies, not haccel.ko's node-wide quotas)");
		return;
	}
	ensure_probed(ctx, d);
	if (d->status == 0) {
		d->provider = HACCEL_HOSTMEM_PROVIDER_DRIVER;
		haccel__info(ctx, "hostmem: pinning through haccel.ko at %s (ABI %u.%u, this library %u.%u): node-wide quotas apply",
			     i->render_node, MAJOR(i->uapi_version), MINOR(i->uapi_version),
			     MAJOR(i->lib_uapi_version), MINOR(i->lib_uapi_version));
		return;
	}
	if (mode == MODE_DRIVER) {
		/* Every allocation fails, each with this reason. */
		d->provider = d->status;
		snprintf(d->provider_why, sizeof(d->provider_why),
			 "HACCEL_HOSTMEM_PROVIDER=driver, but haccel.ko cannot be used: %s", i->reason);
		return;
	}
	d->provider = HACCEL_HOSTMEM_PROVIDER_USER;
	haccel__log(ctx, i->loaded ? HACCEL_LOG_WARN : HACCEL_LOG_INFO,
		    "hostmem: %s; pinning with mlock instead (RLIMIT_MEMLOCK applies, no node-wide quotas)",
		    i->reason);
}

int haccel__driver_provider(struct haccel_ctx *ctx, char *why, size_t len)
{
	struct haccel__driver *d = ctx->driver;
	int ret;

	pthread_mutex_lock(&d->lock);
	if (!d->picked)
		pick(ctx, d);
	ret = d->provider;
	if (why && len)
		snprintf(why, len, "%s", d->provider_why);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* --- pinning ----------------------------------------------------------------- */

#ifdef HAVE_LIBDRM
static void close_handles(int fd, const uint32_t *h, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		struct drm_gem_close c = { .handle = h[k] };

		(void)drmIoctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
	}
}

/*
 * Bytes of [ptr, ptr + bytes) on each node (move_pages() only reports),
 * into need[0..n). Returns 0 or -errno.
 */
static int bytes_per_node(void *ptr, uint64_t bytes, uint64_t *need, uint32_t n,
			  int stop_off_node, uint64_t *off_node_at, int *off_node)
{
	const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	void *pages[QUERY_BATCH];
	int status[QUERY_BATCH];

	for (uint64_t off = 0; off < bytes;) {
		unsigned long k = 0;

		for (; k < QUERY_BATCH && off + k * pg < bytes; k++)
			pages[k] = (char *)ptr + off + k * pg;
		if (move_pages(0, k, pages, NULL, status, 0))
			return -errno;
		for (unsigned long j = 0; j < k; j++) {
			if (status[j] >= 0 && (uint32_t)status[j] < n && need)
				need[status[j]] += pg;
			if (stop_off_node >= 0 && status[j] != stop_off_node) {
				*off_node_at = off + j * pg;
				*off_node = status[j];
				return 0;
			}
		}
		off += k * pg;
	}
	return 0;
}

/*
 * Why a PIN was over quota: the first node where this buffer's pages would
 * take the node-wide or this client's usage past its limit, read back from
 * the driver after the refusal.
 */
static void quota_text(struct haccel__driver *d, void *ptr, uint64_t bytes, int node,
		       char *out, size_t len)
{
	const uint32_t n = d->info.num_nodes;
	uint64_t *need = calloc(3 * (size_t)n, sizeof(uint64_t));
	uint64_t *used, *mine, at = 0;
	struct drm_haccel_stats st;
	int other = 0;

	if (!need) {
		snprintf(out, len, "a quota of haccel.ko was exceeded");
		return;
	}
	used = need + n;
	mine = used + n;
	if (bytes_per_node(ptr, bytes, need, n, -1, &at, &other) && node >= 0 && (uint32_t)node < n)
		need[node] = bytes; /* cannot ask the kernel: it is where it was bound */
	memset(&st, 0, sizeof(st));
	st.node_bytes = (uintptr_t)used;
	st.client_bytes = (uintptr_t)mine;
	st.num_nodes = n;
	if (drmIoctl(d->fd, DRM_IOCTL_HACCEL_STATS, &st)) {
		snprintf(out, len, "a quota of haccel.ko was exceeded (and STATS failed: %s)",
			 strerror(errno));
		goto done;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct drm_haccel_quota q = { .node = k };

		if (!need[k] || drmIoctl(d->fd, DRM_IOCTL_HACCEL_QUOTA_GET, &q))
			continue;
		if (q.node_limit != HACCEL_QUOTA_UNLIMITED && used[k] + need[k] > q.node_limit) {
			snprintf(out, len,
				 "node %u's node-wide quota is %llu bytes and all clients together have %llu bytes pinned there; this buffer needs %llu more on node %u (an administrator raises the quota with `haccel-ctl driver quota set %u BYTES`)",
				 k, (unsigned long long)q.node_limit, (unsigned long long)used[k],
				 (unsigned long long)need[k], k, k);
			goto done;
		}
		if (q.client_limit != HACCEL_QUOTA_UNLIMITED && mine[k] + need[k] > q.client_limit) {
			snprintf(out, len,
				 "node %u's per-client quota is %llu bytes and this context has %llu bytes pinned there; this buffer needs %llu more on node %u (an administrator raises it with `haccel-ctl driver quota set %u BYTES --client BYTES`)",
				 k, (unsigned long long)q.client_limit, (unsigned long long)mine[k],
				 (unsigned long long)need[k], k, k);
			goto done;
		}
	}
	snprintf(out, len, "a quota of haccel.ko was exceeded on a node this buffer's pages are on, but usage has dropped since (%llu bytes pinned on all nodes by all clients now)",
		 (unsigned long long)st.node_total);
done:
	free(need);
}
#endif

int haccel__driver_pin(struct haccel_ctx *ctx, void *ptr, uint64_t bytes, int node,
		       bool strict, struct haccel__pins *out, char *why, size_t len)
{
#ifndef HAVE_LIBDRM
	(void)ptr;
	(void)bytes;
	(void)node;
	(void)strict;
	(void)out;
	snprintf(why, len, "libhaccel was built without libdrm");
	(void)ctx;
	return -ENOTSUP;
#else
	struct haccel__driver *d = ctx->driver;
	uint64_t piece = d->info.max_pin_bytes & ~((2ull << 20) - 1), done = 0;
	char where[32] = "", detail[640];
	uint32_t n, k;
	int e;

	out->n = 0;
	out->handles = NULL;
	if (d->fd < 0) {
		snprintf(why, len, "haccel.ko is not open in this context");
		return -ENODEV;
	}
	/* Whole 2 MiB pieces, so that a hugetlb page is never split. */
	if (!piece)
		piece = d->info.max_pin_bytes;
	n = (uint32_t)((bytes + piece - 1) / piece);
	out->handles = calloc(n, sizeof(*out->handles));
	if (!out->handles) {
		snprintf(why, len, "out of memory for %u pin handles", n);
		return -ENOMEM;
	}
	for (k = 0; k < n; k++, done += piece) {
		struct drm_haccel_pin p = {
			.addr = (uintptr_t)ptr + done,
			.size = bytes - done < piece ? bytes - done : piece,
			.node = node >= 0 ? (uint32_t)node : HACCEL_DRM_NODE_ANY,
			.flags = strict && node >= 0 ? HACCEL_PIN_STRICT_NODE : 0,
		};

		if (drmIoctl(d->fd, DRM_IOCTL_HACCEL_PIN, &p))
			goto fail;
		out->handles[k] = p.handle;
	}
	out->n = n;
	out->pid = (int32_t)getpid();
	pthread_mutex_lock(&ctx->lock);
	d->counts.driver_pins += n;
	pthread_mutex_unlock(&ctx->lock);
	return 0;

fail:
	e = errno;
	/* All or nothing: what was pinned goes before the usage is read. */
	close_handles(d->fd, out->handles, k);
	free(out->handles);
	out->handles = NULL;
	pthread_mutex_lock(&ctx->lock);
	d->counts.driver_refusals++;
	pthread_mutex_unlock(&ctx->lock);
	if (node >= 0)
		snprintf(where, sizeof(where), " on node %d", node);
	switch (e) {
	case EDQUOT:
		quota_text(d, ptr, bytes, node, detail, sizeof(detail));
		break;
	case EXDEV: {
		uint64_t at = 0;
		int real = node;

		if (bytes_per_node(ptr, bytes, NULL, 0, node, &at, &real) == 0 && real != node)
			snprintf(detail, sizeof(detail),
				 "page at offset %llu of %llu is on node %d, not node %d (HACCEL_PIN_STRICT_NODE)",
				 (unsigned long long)at, (unsigned long long)bytes, real, node);
		else
			snprintf(detail, sizeof(detail),
				 "a page is not on node %d (HACCEL_PIN_STRICT_NODE), though it has moved back since",
				 node);
		break;
	}
	case EFAULT:
		snprintf(detail, sizeof(detail), "the range is not ordinary writable memory of this process");
		break;
	case EOPNOTSUPP:
		snprintf(detail, sizeof(detail),
			 "the range is not anonymous, hugetlb or shmem memory (a file of a disk file system?)");
		break;
	case ENOMEM:
		snprintf(detail, sizeof(detail),
			 "the kernel is out of memory (for the page array, or to migrate pages out of a movable zone or CMA before pinning them)");
		break;
	case EOVERFLOW:
		snprintf(detail, sizeof(detail),
			 "a page of the range is pinned too many times already (haccel.ko's page_pin_limit)");
		break;
#ifdef EHWPOISON
	case EHWPOISON:
		snprintf(detail, sizeof(detail), "a page of the range has a hardware memory error");
		break;
#endif
	case EINVAL:
		snprintf(detail, sizeof(detail), "the driver rejected the arguments (node %d offline?)",
			 node);
		break;
	default:
		snprintf(detail, sizeof(detail), "unexpected");
	}
	snprintf(why, len, "haccel.ko refused to pin %llu bytes%s (PIN: %s): %s",
		 (unsigned long long)bytes, where, strerror(e), detail);
	return -e;
#endif
}

void haccel__driver_unpin(struct haccel_ctx *ctx, struct haccel__pins *pins)
{
#ifdef HAVE_LIBDRM
	if (pins->n && ctx->driver->fd >= 0 && pins->pid == (int32_t)getpid())
		close_handles(ctx->driver->fd, pins->handles, pins->n);
#else
	(void)ctx;
#endif
	free(pins->handles);
	pins->handles = NULL;
	pins->n = 0;
}

/* --- public ------------------------------------------------------------------ */

/* The probe's status, probing first if needed; the reason goes to last_error. */
static int usable(struct haccel_ctx *ctx, const char *what)
{
	struct haccel__driver *d = ctx->driver;
	char reason[sizeof(d->info.reason)];
	int status;

	pthread_mutex_lock(&d->lock);
	ensure_probed(ctx, d);
	status = d->status;
	memcpy(reason, d->info.reason, sizeof(reason));
	pthread_mutex_unlock(&d->lock);
	if (status)
		return haccel__fail(ctx, status, "driver: %s: %s", what, reason);
	return 0;
}

int haccel_driver_info(struct haccel_ctx *ctx, struct haccel_driver_info *out)
{
	struct haccel__driver *d;
	uint32_t size;
	int status;

	if (!ctx || !out || out->size < sizeof(uint32_t))
		return -EINVAL;
	size = out->size < sizeof(*out) ? out->size : (uint32_t)sizeof(*out);
	d = ctx->driver;
	pthread_mutex_lock(&d->lock);
	ensure_probed(ctx, d);
	status = d->status;
	memcpy(out, &d->info, size);
	pthread_mutex_unlock(&d->lock);
	out->size = size;
	return status;
}

int haccel_hostmem_provider_stats(struct haccel_ctx *ctx,
				  struct haccel_hostmem_provider_stats *out)
{
	struct haccel_hostmem_provider_stats s;
	struct haccel__provider_counts *c;
	uint32_t size;
	int prov;

	if (!ctx || !out || out->size < sizeof(uint32_t))
		return -EINVAL;
	size = out->size < sizeof(s) ? out->size : (uint32_t)sizeof(s);
	prov = haccel__driver_provider(ctx, NULL, 0);
	memset(&s, 0, sizeof(s));
	s.size = size;
	s.provider = prov < 0 ? HACCEL_HOSTMEM_PROVIDER_NONE : (uint32_t)prov;
	pthread_mutex_lock(&ctx->lock);
	c = &ctx->driver->counts;
	s.bytes_driver = c->bytes[HACCEL_HOSTMEM_PROVIDER_DRIVER];
	s.bytes_user = c->bytes[HACCEL_HOSTMEM_PROVIDER_USER];
	s.buffers_driver = c->buffers[HACCEL_HOSTMEM_PROVIDER_DRIVER];
	s.buffers_user = c->buffers[HACCEL_HOSTMEM_PROVIDER_USER];
	s.driver_pins = c->driver_pins;
	s.driver_refusals = c->driver_refusals;
	pthread_mutex_unlock(&ctx->lock);
	memcpy(out, &s, size);
	return 0;
}

int haccel_driver_stats(struct haccel_ctx *ctx, struct haccel_driver_stats *out,
			struct haccel_driver_node *nodes, uint32_t max_nodes)
{
#ifndef HAVE_LIBDRM
	int ret;

	if (!ctx || !out || out->size < sizeof(uint32_t) || (max_nodes && !nodes))
		return -EINVAL;
	ret = usable(ctx, "cannot read its statistics and quotas");
	return ret ? ret : -ENOTSUP;
#else
	struct haccel_driver_stats s;
	struct drm_haccel_stats st;
	struct haccel__driver *d;
	uint64_t *used, *mine;
	uint32_t n, size;
	int ret;

	if (!ctx || !out || out->size < sizeof(uint32_t) || (max_nodes && !nodes))
		return -EINVAL;
	ret = usable(ctx, "cannot read its statistics and quotas");
	if (ret)
		return ret;
	d = ctx->driver;
	n = d->info.num_nodes;
	used = calloc(2 * (size_t)n, sizeof(uint64_t));
	if (!used)
		return haccel__fail(ctx, -ENOMEM, "driver: out of memory for %u nodes' statistics", n);
	mine = used + n;
	memset(&st, 0, sizeof(st));
	st.node_bytes = (uintptr_t)used;
	st.client_bytes = (uintptr_t)mine;
	st.num_nodes = n;
	if (drmIoctl(d->fd, DRM_IOCTL_HACCEL_STATS, &st)) {
		ret = -errno;
		free(used);
		return haccel__fail(ctx, ret, "driver: STATS failed: %s", strerror(-ret));
	}
	size = out->size < sizeof(s) ? out->size : (uint32_t)sizeof(s);
	memset(&s, 0, sizeof(s));
	s.size = size;
	s.num_nodes = n;
	s.pinned_bytes = st.node_total;
	s.client_bytes = st.client_total;
	s.buffers = st.node_bos;
	s.client_buffers = st.client_bos;
	memcpy(out, &s, size);
	for (uint32_t k = 0; k < n && k < max_nodes; k++) {
		struct drm_haccel_quota q = { .node = k };

		memset(&nodes[k], 0, sizeof(nodes[k]));
		nodes[k].node = k;
		nodes[k].pinned_bytes = used[k];
		nodes[k].client_bytes = mine[k];
		/* QUOTA_GET refuses an offline node: it has no quota. */
		if (drmIoctl(d->fd, DRM_IOCTL_HACCEL_QUOTA_GET, &q) == 0) {
			nodes[k].online = 1;
			nodes[k].node_limit = q.node_limit;
			nodes[k].client_limit = q.client_limit;
		}
	}
	free(used);
	return (int)n;
#endif
}

int haccel_driver_quota_set(struct haccel_ctx *ctx, int32_t node, uint64_t node_limit,
			    uint64_t client_limit)
{
	int ret;

	if (!ctx)
		return -EINVAL;
	if (node < 0 && node != HACCEL_NODE_ANY)
		return haccel__fail(ctx, -EINVAL, "driver: node %d is neither a node id nor HACCEL_NODE_ANY",
				    node);
	ret = usable(ctx, "cannot set a quota");
	if (ret)
		return ret;
#ifndef HAVE_LIBDRM
	(void)node_limit;
	(void)client_limit;
	return -ENOTSUP;
#else
	{
		struct haccel__driver *d = ctx->driver;
		struct drm_haccel_quota q = {
			.node = node == HACCEL_NODE_ANY ? HACCEL_DRM_NODE_ANY : (uint32_t)node,
			.node_limit = node_limit,
			.client_limit = client_limit,
		};
		char which[32];

		if (node == HACCEL_NODE_ANY)
			snprintf(which, sizeof(which), "every node");
		else
			snprintf(which, sizeof(which), "node %d", node);
		if (drmIoctl(d->fd, DRM_IOCTL_HACCEL_QUOTA_SET, &q) == 0)
			return 0;
		ret = -errno;
		if (ret == -EPERM)
			return haccel__fail(ctx, ret,
					    "driver: haccel.ko refused to set the quota of %s (QUOTA_SET: %s): changing a quota needs CAP_SYS_ADMIN (run as root)",
					    which, strerror(-ret));
		if (ret == -EINVAL)
			return haccel__fail(ctx, ret,
					    "driver: haccel.ko refused to set the quota of %s (QUOTA_SET: %s): the node is not online (the driver counts nodes 0 to %u)",
					    which, strerror(-ret), d->info.num_nodes - 1);
		return haccel__fail(ctx, ret, "driver: haccel.ko refused to set the quota of %s (QUOTA_SET: %s)",
				    which, strerror(-ret));
	}
#endif
}
