// SPDX-License-Identifier: GPL-2.0
/*
 * haccel.ko: a DRM render-node driver on a software-only device that pins
 * user memory long-term as GEM buffer objects, accounts it per NUMA node
 * against quotas, and shares it as dma-bufs. This file holds the module,
 * the device, the file lifecycle, the ioctl table and GET_PARAM.
 */

#include <linux/compat.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/nodemask.h>
#include <linux/pagemap.h>
#include <linux/platform_device.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_prime.h>

#include "hac_drv.h"

static unsigned int node_quota_pct = 50;
module_param(node_quota_pct, uint, 0444);
MODULE_PARM_DESC(node_quota_pct,
		 "Initial node-wide limit of each NUMA node, in percent of its memory (0-100, default 50)");

static unsigned int client_quota_pct = 100;
module_param(client_quota_pct, uint, 0444);
MODULE_PARM_DESC(client_quota_pct,
		 "Initial per-client limit on each NUMA node, in percent of its memory (0-100, default 100)");

static unsigned int page_pin_limit = HAC_PAGE_PIN_LIMIT_MAX;
module_param(page_pin_limit, uint, 0444);
MODULE_PARM_DESC(page_pin_limit,
		 "A PIN fails with EOVERFLOW when it would leave a page with more than this many pins by all users (1-1048576, default 1048576)");

static struct hac_device *hac_dev;

static int hac_get_param_ioctl(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct drm_haccel_param *args = data;

	if (args->flags)
		return -EINVAL;

	switch (args->param) {
	case HACCEL_PARAM_UAPI_VERSION:
		args->value = HACCEL_UAPI_VERSION;
		break;
	case HACCEL_PARAM_UAPI_MIN_VERSION:
		args->value = HACCEL_UAPI_VERSION_ENCODE(1, 0);
		break;
	case HACCEL_PARAM_CAPS:
		args->value = HACCEL_CAP_PIN_STRICT_NODE |
			      HACCEL_CAP_PRIME_EXPORT |
			      HACCEL_CAP_PRIME_MMAP |
			      HACCEL_CAP_CLIENT_QUOTA;
		break;
	case HACCEL_PARAM_NUM_NODES:
		args->value = nr_node_ids;
		break;
	case HACCEL_PARAM_PAGE_SIZE:
		args->value = PAGE_SIZE;
		break;
	case HACCEL_PARAM_MAX_PIN_SIZE:
		args->value = HAC_MAX_PIN_SIZE;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static const struct drm_ioctl_desc hac_ioctls[] = {
	DRM_IOCTL_DEF_DRV(HACCEL_GET_PARAM, hac_get_param_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(HACCEL_PIN, hac_pin_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(HACCEL_BO_INFO, hac_bo_info_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(HACCEL_STATS, hac_stats_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(HACCEL_QUOTA_GET, hac_quota_get_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(HACCEL_QUOTA_SET, hac_quota_set_ioctl, DRM_RENDER_ALLOW),
};

/*
 * Size of each struct in the first ABI version: shorter ones lack fields
 * that every version needs. Later versions grow the structs, and a
 * first-version struct is then zero-extended by drm_ioctl().
 */
#define HAC_V1_SIZE_PARAM	16
#define HAC_V1_SIZE_PIN		32
#define HAC_V1_SIZE_BO_INFO	40
#define HAC_V1_SIZE_STATS	56
#define HAC_V1_SIZE_QUOTA	24

static const u16 hac_ioctl_min_size[] = {
	[DRM_HACCEL_GET_PARAM] = HAC_V1_SIZE_PARAM,
	[DRM_HACCEL_PIN] = HAC_V1_SIZE_PIN,
	[DRM_HACCEL_BO_INFO] = HAC_V1_SIZE_BO_INFO,
	[DRM_HACCEL_STATS] = HAC_V1_SIZE_STATS,
	[DRM_HACCEL_QUOTA_GET] = HAC_V1_SIZE_QUOTA,
	[DRM_HACCEL_QUOTA_SET] = HAC_V1_SIZE_QUOTA,
};

static_assert(ARRAY_SIZE(hac_ioctl_min_size) == ARRAY_SIZE(hac_ioctls));

/* Structs only grow, and in steps of 8 bytes. */
#define HAC_ABI_GROWS_FROM(type, v1) \
	static_assert(sizeof(type) >= (v1) && sizeof(type) % 8 == 0)
HAC_ABI_GROWS_FROM(struct drm_haccel_param, HAC_V1_SIZE_PARAM);
HAC_ABI_GROWS_FROM(struct drm_haccel_pin, HAC_V1_SIZE_PIN);
HAC_ABI_GROWS_FROM(struct drm_haccel_bo_info, HAC_V1_SIZE_BO_INFO);
HAC_ABI_GROWS_FROM(struct drm_haccel_stats, HAC_V1_SIZE_STATS);
HAC_ABI_GROWS_FROM(struct drm_haccel_quota, HAC_V1_SIZE_QUOTA);

/*
 * drm_ioctl() zero-extends a short struct and silently drops the tail of a
 * long one. Do what copy_struct_from_user() does instead: refuse a struct
 * shorter than the first ABI version, and a longer one unless the bytes
 * this driver does not know are zero, so newer userspace cannot mistake an
 * ignored field for an honoured one. A writer racing this check only
 * changes bytes the driver never reads.
 */
static int hac_ioctl_check(unsigned int cmd, unsigned long arg)
{
	unsigned int nr = _IOC_NR(cmd), idx, usize, ksize;
	const struct drm_ioctl_desc *desc;
	int ret;

	if (_IOC_TYPE(cmd) != DRM_IOCTL_BASE || nr < DRM_COMMAND_BASE ||
	    nr >= DRM_COMMAND_BASE + ARRAY_SIZE(hac_ioctls))
		return 0;

	idx = nr - DRM_COMMAND_BASE;
	desc = &hac_ioctls[idx];
	if (_IOC_DIR(cmd) != _IOC_DIR(desc->cmd))
		return -EINVAL;

	usize = _IOC_SIZE(cmd);
	ksize = _IOC_SIZE(desc->cmd);
	if (usize < hac_ioctl_min_size[idx])
		return -EINVAL;
	if (usize > ksize) {
		ret = check_zeroed_user((const void __user *)arg + ksize,
					usize - ksize);
		if (ret < 0)
			return ret;
		if (!ret)
			return -E2BIG;
	}

	/*
	 * drm_ioctl() copies the struct out after the handler ran, so a PIN
	 * struct that cannot be written would fail with -EFAULT after the
	 * buffer was pinned and its handle made, a handle the caller never
	 * learns. Make sure now, without writing anything, that every byte
	 * drm_ioctl() will copy out can be written, so such a call fails
	 * before anything is pinned. That is usize bytes, not min(usize,
	 * ksize): drm_ioctl() copies out the size the command encodes, a
	 * longer struct's (zero) tail included. (A thread that makes the
	 * struct read-only while the PIN runs still loses the handle, until
	 * the file is closed: docs/abi.md.)
	 */
	if (idx == DRM_HACCEL_PIN &&
	    fault_in_safe_writeable((const char __user *)arg, usize))
		return -EFAULT;
	return 0;
}

static long hac_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	int ret = hac_ioctl_check(cmd, arg);

	if (ret)
		return ret;
	return drm_ioctl(filp, cmd, arg);
}

#ifdef CONFIG_COMPAT
static long hac_compat_ioctl(struct file *filp, unsigned int cmd,
			     unsigned long arg)
{
	int ret = hac_ioctl_check(cmd, (unsigned long)compat_ptr(arg));

	if (ret)
		return ret;
	return drm_compat_ioctl(filp, cmd, arg);
}
#else
#define hac_compat_ioctl NULL
#endif

/*
 * The buffers are the caller's own memory, already mapped in its address
 * space, so the file itself has nothing to mmap: drm_gem_mmap() finds no
 * object (none gets a fake offset) and fails. Sharing is by dma-buf.
 */
static const struct file_operations hac_fops = {
	.owner = THIS_MODULE,
	.open = drm_open,
	.release = drm_release,
	.unlocked_ioctl = hac_ioctl,
	.compat_ioctl = hac_compat_ioctl,
	.poll = drm_poll,
	.read = drm_read,
	.mmap = drm_gem_mmap,
#ifdef HAC_HAVE_FOP_UNSIGNED_OFFSET
	.fop_flags = FOP_UNSIGNED_OFFSET,
#endif
};

static int hac_open(struct drm_device *drm, struct drm_file *file)
{
	struct hac_client *client;

	client = hac_client_create(to_hac_dev(drm));
	if (IS_ERR(client))
		return PTR_ERR(client);
	file->driver_priv = client;
	return 0;
}

/* Runs after drm_gem_release() dropped the file's handles. */
static void hac_postclose(struct drm_device *drm, struct drm_file *file)
{
	hac_client_close(file->driver_priv);
	file->driver_priv = NULL;
}

static const struct drm_driver hac_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER,
	.open = hac_open,
	.postclose = hac_postclose,
	.ioctls = hac_ioctls,
	.num_ioctls = ARRAY_SIZE(hac_ioctls),
	.fops = &hac_fops,
#ifdef HAC_HAVE_DRIVER_PRIME_HOOKS
	.prime_handle_to_fd = hac_prime_handle_to_fd,
	.prime_fd_to_handle = drm_gem_prime_fd_to_handle,
#endif
#ifdef HAC_HAVE_DRIVER_GEM_PRIME_MMAP
	.gem_prime_mmap = drm_gem_prime_mmap,
#endif
	.name = HACCEL_DRIVER_NAME,
	.desc = HAC_DRIVER_DESC,
#ifdef HAC_HAVE_DRIVER_DATE
	.date = HAC_DRIVER_DATE,
#endif
	.major = HAC_DRIVER_MAJOR,
	.minor = HAC_DRIVER_MINOR,
	.patchlevel = HAC_DRIVER_PATCHLEVEL,
};

static int __init hac_init(void)
{
	struct platform_device *pdev;
	struct hac_device *hdev;
	int ret;

	if (node_quota_pct > 100 || client_quota_pct > 100) {
		pr_err("haccel: node_quota_pct and client_quota_pct are percentages (0-100)\n");
		return -EINVAL;
	}
	if (!page_pin_limit || page_pin_limit > HAC_PAGE_PIN_LIMIT_MAX) {
		pr_err("haccel: page_pin_limit must be 1-%u\n", HAC_PAGE_PIN_LIMIT_MAX);
		return -EINVAL;
	}

	pdev = platform_device_register_simple(HACCEL_DRIVER_NAME, -1, NULL, 0);
	if (IS_ERR(pdev))
		return PTR_ERR(pdev);

	/* No driver binds to the device, so nothing releases its devres: do it by hand. */
	if (!devres_open_group(&pdev->dev, NULL, GFP_KERNEL)) {
		ret = -ENOMEM;
		goto err_unregister_pdev;
	}

	hdev = devm_drm_dev_alloc(&pdev->dev, &hac_driver, struct hac_device,
				  drm);
	if (IS_ERR(hdev)) {
		ret = PTR_ERR(hdev);
		goto err_release_devres;
	}
	hdev->pdev = pdev;
	sema_init(&hdev->pin_slots, HAC_PIN_SLOTS);
	hdev->page_pin_limit = page_pin_limit;

	ret = drmm_mutex_init(&hdev->drm, &hdev->export_lock);
	if (ret)
		goto err_release_devres;

	ret = hac_quota_init(hdev, node_quota_pct, client_quota_pct);
	if (ret)
		goto err_release_devres;

	ret = drm_dev_register(&hdev->drm, 0);
	if (ret)
		goto err_release_devres;

	hac_debugfs_init(hdev);
	hac_dev = hdev;
	return 0;

err_release_devres:
	devres_release_group(&pdev->dev, NULL);
err_unregister_pdev:
	platform_device_unregister(pdev);
	return ret;
}

/*
 * Every open file and every dma-buf exported from a buffer holds a
 * reference on this module, so once exit runs no buffer is left.
 */
static void __exit hac_exit(void)
{
	struct platform_device *pdev = hac_dev->pdev;

	hac_debugfs_fini(hac_dev);
	drm_dev_unregister(&hac_dev->drm);
	devres_release_group(&pdev->dev, NULL);
	platform_device_unregister(pdev);
}

module_init(hac_init);
module_exit(hac_exit);

MODULE_DESCRIPTION("haccel: " HAC_DRIVER_DESC);
MODULE_LICENSE("GPL");
/*
 * The release of the haccel package, as in dkms.conf and driver/Makefile
 * (tests/driver-build.sh checks they agree); the ABI has its own version,
 * HACCEL_UAPI_VERSION, which DRM_IOCTL_VERSION's major and minor follow.
 */
MODULE_VERSION("0.1.0");
