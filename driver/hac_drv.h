/* SPDX-License-Identifier: GPL-2.0 */
/*
 * haccel.ko: the node-wide broker of pinned host memory. Shared types of
 * the driver (hac_drv.c), its buffer objects (hac_gem.c), its accounting
 * (hac_quota.c) and its debugfs files (hac_debugfs.c).
 */
#ifndef __HAC_DRV_H__
#define __HAC_DRV_H__

#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/semaphore.h>
#include <linux/spinlock.h>
#include <linux/types.h>

#include <drm/drm_device.h>
#include <drm/drm_gem.h>

#include "hac_conf.h"
#include "haccel_drm.h"

#define HAC_DRIVER_DESC		"pinned host memory broker"
#define HAC_DRIVER_DATE		"20250601"
/* DRM_IOCTL_VERSION reports the ABI version (not the package's). */
#define HAC_DRIVER_MAJOR	HACCEL_UAPI_MAJOR
#define HAC_DRIVER_MINOR	HACCEL_UAPI_MINOR
#define HAC_DRIVER_PATCHLEVEL	0

/*
 * The page array of a buffer is one kvmalloc() allocation, which is capped
 * at INT_MAX bytes; that caps one PIN at about 1 TiB with 4 KiB pages.
 */
#define HAC_MAX_PIN_PAGES	((u64)INT_MAX / sizeof(struct page *))
#define HAC_MAX_PIN_SIZE	(HAC_MAX_PIN_PAGES << PAGE_SHIFT)

/*
 * A page's reference count is an int, and every pin of a small page adds
 * GUP_PIN_COUNTING_BIAS (1024) to it: some two million pins of one page
 * would overflow it, and neither the quotas (they charge each PIN, not
 * each distinct page) nor GUP (it only refuses a count already <= 0) stop
 * that. So a PIN fails with -EOVERFLOW when it leaves a page it pinned
 * with a count over page_pin_limit (module parameter, at most
 * HAC_PAGE_PIN_LIMIT_MAX) times GUP_PIN_COUNTING_BIAS, and at most
 * HAC_PIN_SLOTS batches of pins (hac_gem.c) run at once, each checked
 * before its slot is given back: what the driver's pins can add to a
 * count is then bounded (hac_gem.c asserts it at build time).
 */
#define HAC_PAGE_PIN_LIMIT_MAX	(1U << 20)
#define HAC_PIN_SLOTS		32

struct dentry;
struct platform_device;

/**
 * struct hac_device - the one haccel device
 * @drm: the DRM device; its lifetime is the module's
 * @pdev: the software-only platform device @drm hangs off
 * @lock: protects the fields from @node_used to @clients; held only for
 *	short, non-sleeping walks over the nodes or the clients
 * @node_used: bytes pinned on each node by every client, [nr_node_ids]
 * @node_limit: node-wide limit of each node, [nr_node_ids]
 * @client_limit: limit of each client on each node, [nr_node_ids]
 * @nbos: live buffer objects
 * @clients: every &struct hac_client still referenced, open or not
 * @export_lock: serialises this driver's PRIME exports (hac_gem.c)
 * @pin_slots: batches of pins that may run at once, HAC_PIN_SLOTS
 * @page_pin_limit: the module parameter, fixed at load
 * @debugfs: the driver's debugfs directory, or an error pointer
 */
struct hac_device {
	struct drm_device drm;
	struct platform_device *pdev;

	spinlock_t lock; /* see above */
	u64 *node_used;
	u64 *node_limit;
	u64 *client_limit;
	u64 nbos;
	struct list_head clients;

	struct mutex export_lock; /* see above */
	struct semaphore pin_slots;
	unsigned int page_pin_limit;

	struct dentry *debugfs;
};

/**
 * struct hac_client - one open file of the device, the unit quotas charge
 * @hdev: the device
 * @link: entry in &hac_device.clients, under &hac_device.lock
 * @refs: the open file plus one per buffer charged here, under
 *	&hac_device.lock. A buffer exported as a dma-buf can outlive the file,
 *	so the charge (and this struct) live until the last such buffer goes.
 * @closed: the file was closed, under &hac_device.lock
 * @nbos: live buffers charged here, under &hac_device.lock
 * @pid: thread-group id of the process that opened the file; immutable
 * @comm: its command name at open; immutable
 * @used: bytes charged here on each node, [nr_node_ids], under
 *	&hac_device.lock
 */
struct hac_client {
	struct hac_device *hdev;
	struct list_head link;
	unsigned int refs;
	bool closed;
	u64 nbos;
	pid_t pid;
	char comm[TASK_COMM_LEN];
	u64 used[];
};

/**
 * struct hac_bo - pinned user pages as a GEM buffer object
 * @base: the GEM object; its refcount is the buffer's lifetime
 * @owner: the client charged for the pages; holds a reference; immutable
 * @pages: the pinned pages, @npages of them; immutable
 * @npages: number of pages (@base.size >> PAGE_SHIFT)
 * @addr: user address the range was pinned from, in the owner's process
 * @node_pages: pages on each node, [nr_node_ids]; immutable
 */
struct hac_bo {
	struct drm_gem_object base;
	struct hac_client *owner;
	struct page **pages;
	unsigned long npages;
	u64 addr;
	u64 *node_pages;
};

static inline struct hac_device *to_hac_dev(struct drm_device *drm)
{
	return container_of(drm, struct hac_device, drm);
}

static inline struct hac_bo *to_hac_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct hac_bo, base);
}

/* hac_gem.c */
int hac_pin_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int hac_bo_info_ioctl(struct drm_device *drm, void *data,
		      struct drm_file *file);
#ifdef HAC_HAVE_DRIVER_PRIME_HOOKS
int hac_prime_handle_to_fd(struct drm_device *drm, struct drm_file *file,
			   u32 handle, u32 flags, int *prime_fd);
#endif

/* hac_quota.c */
int hac_quota_init(struct hac_device *hdev, unsigned int node_pct,
		   unsigned int client_pct);
struct hac_client *hac_client_create(struct hac_device *hdev);
void hac_client_close(struct hac_client *client);
int hac_quota_precheck(struct hac_client *client, u32 node, u64 size);
int hac_quota_charge(struct hac_client *client, const u64 *node_pages);
void hac_quota_uncharge(struct hac_client *client, const u64 *node_pages);
int hac_copy_nodes_to_user(u64 uptr, u32 count, const u64 *vals);
int hac_stats_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int hac_quota_get_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file);
int hac_quota_set_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file);

/* hac_debugfs.c */
void hac_debugfs_init(struct hac_device *hdev);
void hac_debugfs_fini(struct hac_device *hdev);

#endif /* __HAC_DRV_H__ */
