// SPDX-License-Identifier: GPL-2.0
/*
 * Buffer objects: user pages pinned long-term behind a GEM object. The
 * pages belong to the caller's own mapping (anonymous or hugetlb memory it
 * also registers with CUDA and io_uring); the driver only holds them in
 * place, accounts them, and lends them out as dma-bufs.
 */

#include <linux/mm.h>
#include <linux/nodemask.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>

#include "hac_drv.h"

/* Pages pinned per pin_user_pages_fast() call, between signal checks. */
#define HAC_PIN_BATCH	65536

static void hac_bo_free(struct drm_gem_object *obj)
{
	struct hac_bo *bo = to_hac_bo(obj);
	struct hac_client *owner = bo->owner;

	/*
	 * Unpin first, uncharge after: the statistics may briefly count
	 * bytes already unpinned, never pinned bytes they do not count.
	 * Dirty: devices may have written the pages behind the CPU's back.
	 */
	unpin_user_pages_dirty_lock(bo->pages, bo->npages, true);
	hac_quota_uncharge(owner, bo->node_pages);
	kvfree(bo->pages);
	kfree(bo->node_pages);
	drm_gem_object_release(obj);
	kfree(bo);
}

static struct sg_table *hac_bo_get_sg_table(struct drm_gem_object *obj)
{
	struct hac_bo *bo = to_hac_bo(obj);

	return drm_prime_pages_to_sg(obj->dev, bo->pages, bo->npages);
}

/*
 * mmap() of an exported dma-buf. The pages are anonymous memory, which
 * vm_insert_page() refuses and a fault handler must not hand out as page
 * cache, so they are mapped by PFN; they stay pinned, and the VMA holds a
 * reference on the object (drm_gem_vm_open/close), for as long as the
 * mapping exists. No fake offset is ever made for these objects, so
 * vm_pgoff is the page offset into the buffer.
 */
static int hac_bo_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	struct hac_bo *bo = to_hac_bo(obj);
	unsigned long pgoff = vma->vm_pgoff, npages = vma_pages(vma);
	unsigned long addr = vma->vm_start, i, run;
	int ret;

	/*
	 * A private writable mapping would need copy-on-write of PFN pages:
	 * refuse it. (A read-only file's MAP_SHARED mapping loses VM_SHARED
	 * but also VM_MAYWRITE, and is fine.)
	 */
	if (is_cow_mapping(vma->vm_flags))
		return -EINVAL;
	if (pgoff > bo->npages || npages > bo->npages - pgoff)
		return -EINVAL;

	for (i = 0; i < npages; i += run) {
		unsigned long pfn = page_to_pfn(bo->pages[pgoff + i]);

		for (run = 1; i + run < npages; run++)
			if (page_to_pfn(bo->pages[pgoff + i + run]) != pfn + run)
				break;
		ret = remap_pfn_range(vma, addr + (i << PAGE_SHIFT), pfn,
				      run << PAGE_SHIFT, vma->vm_page_prot);
		if (ret)
			return ret;
	}
	return 0;
}

static const struct vm_operations_struct hac_vm_ops = {
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static const struct drm_gem_object_funcs hac_gem_funcs = {
	.free = hac_bo_free,
	.get_sg_table = hac_bo_get_sg_table,
	.mmap = hac_bo_mmap,
	.vm_ops = &hac_vm_ops,
};

/* Pin npages from start into pages; all or nothing. */
static int hac_pin_pages(unsigned long start, unsigned long npages,
			 struct page **pages)
{
	unsigned long done = 0;
	int ret;

	while (done < npages) {
		int want = min_t(unsigned long, npages - done, HAC_PIN_BATCH);

		ret = pin_user_pages_fast(start + (done << PAGE_SHIFT), want,
					  FOLL_WRITE | FOLL_LONGTERM,
					  pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto err_unpin;
		}
		done += ret;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto err_unpin;
		}
		cond_resched();
	}
	return 0;

err_unpin:
	unpin_user_pages(pages, done);
	return ret;
}

static struct hac_bo *hac_bo_create(struct hac_client *client, u64 addr,
				    u64 size, u32 node, u32 flags)
{
	struct hac_device *hdev = client->hdev;
	unsigned long i, npages = size >> PAGE_SHIFT;
	struct hac_bo *bo;
	int ret;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL_ACCOUNT);
	if (!bo)
		return ERR_PTR(-ENOMEM);

	bo->node_pages = kcalloc(nr_node_ids, sizeof(*bo->node_pages),
				 GFP_KERNEL_ACCOUNT);
	if (!bo->node_pages) {
		ret = -ENOMEM;
		goto err_free_bo;
	}

	/* A huge request fails here rather than invoke the OOM killer. */
	bo->pages = kvmalloc_array(npages, sizeof(*bo->pages),
				   GFP_KERNEL_ACCOUNT | __GFP_NOWARN |
				   __GFP_RETRY_MAYFAIL);
	if (!bo->pages) {
		ret = -ENOMEM;
		goto err_free_node_pages;
	}

	ret = hac_pin_pages(addr, npages, bo->pages);
	if (ret)
		goto err_free_pages;

	for (i = 0; i < npages; i++)
		bo->node_pages[page_to_nid(bo->pages[i])]++;

	if ((flags & HACCEL_PIN_STRICT_NODE) && bo->node_pages[node] != npages) {
		ret = -EXDEV;
		goto err_unpin;
	}

	ret = hac_quota_charge(client, bo->node_pages);
	if (ret)
		goto err_unpin;

	bo->owner = client;
	bo->npages = npages;
	bo->addr = addr;
	bo->base.funcs = &hac_gem_funcs;
	drm_gem_private_object_init(&hdev->drm, &bo->base, size);
	return bo;

err_unpin:
	unpin_user_pages(bo->pages, npages);
err_free_pages:
	kvfree(bo->pages);
err_free_node_pages:
	kfree(bo->node_pages);
err_free_bo:
	kfree(bo);
	return ERR_PTR(ret);
}

int hac_pin_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct hac_client *client = file->driver_priv;
	struct drm_haccel_pin *args = data;
	struct hac_bo *bo;
	u32 handle;
	u64 end;
	int ret;

	if (args->flags & ~HACCEL_PIN_FLAGS || args->pad)
		return -EINVAL;
	if (!args->size || args->size > HAC_MAX_PIN_SIZE ||
	    !PAGE_ALIGNED(args->addr) || !PAGE_ALIGNED(args->size) ||
	    check_add_overflow(args->addr, args->size, &end))
		return -EINVAL;
	if (args->node == HACCEL_NODE_ANY) {
		if (args->flags & HACCEL_PIN_STRICT_NODE)
			return -EINVAL;
	} else if (args->node >= nr_node_ids || !node_online(args->node)) {
		return -EINVAL;
	}
	if (!access_ok(u64_to_user_ptr(args->addr), args->size))
		return -EFAULT;

	ret = hac_quota_precheck(client, args->node, args->size);
	if (ret)
		return ret;

	bo = hac_bo_create(client, args->addr, args->size, args->node,
			   args->flags);
	if (IS_ERR(bo))
		return PTR_ERR(bo);

	/* On failure the put frees the buffer, which unpins and uncharges. */
	ret = drm_gem_handle_create(file, &bo->base, &handle);
	drm_gem_object_put(&bo->base);
	if (ret)
		return ret;

	args->handle = handle;
	return 0;
}

int hac_bo_info_ioctl(struct drm_device *drm, void *data,
		      struct drm_file *file)
{
	struct drm_haccel_bo_info *args = data;
	struct drm_gem_object *obj;
	struct hac_bo *bo;
	int ret;

	if (args->flags || args->pad)
		return -EINVAL;

	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	bo = to_hac_bo(obj);

	ret = hac_copy_nodes_to_user(args->node_pages, args->num_nodes,
				     bo->node_pages);
	if (ret)
		goto out_put;

	args->size = obj->size;
	args->addr = bo->owner == file->driver_priv ? bo->addr : 0;
	args->num_nodes = nr_node_ids;
out_put:
	drm_gem_object_put(obj);
	return ret;
}
