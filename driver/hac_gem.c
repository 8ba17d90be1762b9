// SPDX-License-Identifier: GPL-2.0
/*
 * Buffer objects: user pages pinned long-term behind a GEM object. The
 * pages belong to the caller's own mapping (anonymous, hugetlb or shmem
 * memory it also registers with CUDA and io_uring); the driver only holds
 * them in place, accounts them, and lends them out as dma-bufs.
 */

#include <linux/dma-buf.h>
#include <linux/fs.h>
#include <linux/hugetlb.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/nodemask.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>

#include "hac_drv.h"

/*
 * Pages pinned per pin_user_pages() call: the mmap lock is held for one
 * batch at a time, and fatal signals are checked between batches (GUP
 * itself also stops at one).
 */
#define HAC_PIN_BATCH	16384

/*
 * What the driver's pins can make of one page's reference count: a count
 * kept is at most (page_pin_limit + 1) * GUP_PIN_COUNTING_BIAS - 1 when it
 * was checked, and at most HAC_PIN_SLOTS batches are pinned but not yet
 * checked (or being undone) at any time, each adding at most
 * HAC_PIN_BATCH * GUP_PIN_COUNTING_BIAS to a page (one small page mapped
 * at every address of the batch). Together that must leave the rest of
 * the kernel a wide margin below INT_MAX: here over 2^28 references.
 */
static_assert(((u64)HAC_PAGE_PIN_LIMIT_MAX + 1) * GUP_PIN_COUNTING_BIAS +
	      (u64)HAC_PIN_SLOTS * HAC_PIN_BATCH * GUP_PIN_COUNTING_BIAS <
	      (u64)INT_MAX - (1ULL << 28));

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

#ifdef HAC_HAVE_DRIVER_PRIME_HOOKS
/*
 * PRIME export (DRM_IOCTL_PRIME_HANDLE_TO_FD). The DRM core makes one
 * dma-buf per buffer: the first export creates it, with the access mode
 * that export asked for (DRM_RDWR or not), and caches it in obj->dma_buf
 * for as long as the buffer has a handle in any file (an import of it
 * puts it back there); every later export, from any file, returns that
 * dma-buf with its first mode, whatever DRM_RDWR says. Rather than hand a
 * caller that asked for a read-only fd one that maps writable (or the
 * other way round), refuse an export whose mode is not the cached
 * dma-buf's with -EBUSY.
 *
 * obj->dma_buf is read under dev->object_name_lock, the lock the core sets
 * and clears it under (so it cannot be freed while its mode is read), and
 * export_lock keeps any other export of this driver from creating the
 * dma-buf between the check and the core's export. Nothing else can set
 * it meanwhile: an import sets obj->dma_buf only when it is NULL, and
 * while the caller's handle exists it is NULL only if no dma-buf of the
 * buffer was ever made.
 */
int hac_prime_handle_to_fd(struct drm_device *drm, struct drm_file *file,
			   u32 handle, u32 flags, int *prime_fd)
{
	struct hac_device *hdev = to_hac_dev(drm);
	struct drm_gem_object *obj;
	int ret = 0;

	obj = drm_gem_object_lookup(file, handle);
	if (!obj)
		return -ENOENT;

	mutex_lock(&hdev->export_lock);
	mutex_lock(&drm->object_name_lock);
	if (obj->dma_buf &&
	    !(obj->dma_buf->file->f_mode & FMODE_WRITE) != !(flags & DRM_RDWR))
		ret = -EBUSY;
	mutex_unlock(&drm->object_name_lock);
	if (!ret)
		ret = drm_gem_prime_handle_to_fd(drm, file, handle, flags,
						 prime_fd);
	mutex_unlock(&hdev->export_lock);
	drm_gem_object_put(obj);
	return ret;
}
#endif

/*
 * Only memory that no filesystem writes back may be pinned long-term:
 * anonymous, hugetlb and shmem (tmpfs files, memfd, shared anonymous
 * memory, SysV shm). A long-term pin of page cache that a filesystem
 * writes back (ext4, xfs...) breaks the filesystem's dirty tracking: the
 * pages are written by devices, then marked dirty at unpin behind its back,
 * the pattern behind known filesystem warnings and BUGs. GUP only refuses
 * it from 6.5, and even then not for private file mappings, whose unwritten
 * pages are page cache: refuse every VMA that is not one of the three.
 * vma_is_shmem() is not exported; tmpfs is the filesystem of every shmem
 * file, internal ones included.
 */
static bool hac_vma_pinnable(struct vm_area_struct *vma)
{
	if (vma_is_anonymous(vma) || is_vm_hugetlb_page(vma))
		return true;
	return vma->vm_file &&
	       file_inode(vma->vm_file)->i_sb->s_magic == TMPFS_MAGIC;
}

/*
 * Check every VMA of [start, end), in address order, with the mmap lock
 * held: a hole or a VM_IO/VM_PFNMAP mapping (no pages behind it) is
 * -EFAULT, any other mapping that is not pinnable -EOPNOTSUPP (what
 * io_uring's buffer registration returns for the same memory).
 */
static int hac_check_vmas(struct mm_struct *mm, unsigned long start,
			  unsigned long end)
{
	struct vm_area_struct *vma;

	mmap_assert_locked(mm);
	while (start < end) {
		vma = vma_lookup(mm, start);
		if (!vma || vma->vm_flags & (VM_IO | VM_PFNMAP))
			return -EFAULT;
		if (!hac_vma_pinnable(vma))
			return -EOPNOTSUPP;
		start = vma->vm_end;
	}
	return 0;
}

/* pin_user_pages() lost its vmas argument in 6.5. */
static long hac_pin_user_pages(unsigned long start, unsigned long npages,
			       struct page **pages)
{
#ifdef HAC_HAVE_PIN_USER_PAGES_VMAS
	return pin_user_pages(start, npages, FOLL_WRITE | FOLL_LONGTERM, pages,
			      NULL);
#else
	return pin_user_pages(start, npages, FOLL_WRITE | FOLL_LONGTERM, pages);
#endif
}

/*
 * Whether one of the n pages just pinned is now pinned more than
 * page_pin_limit times, counting every user's pins: its folio's reference
 * count over GUP_PIN_COUNTING_BIAS. For a small page that is its pins
 * (its other references, mappings and page cache, are normally fewer
 * than the bias); a huge page's pins add 1 each, so there the limit is on
 * the references the count can hold, which is what has to be bounded.
 */
static bool hac_pins_over_limit(struct hac_device *hdev, struct page **pages,
				unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		if (folio_ref_count(page_folio(pages[i])) / GUP_PIN_COUNTING_BIAS >
		    hdev->page_pin_limit)
			return true;
	return false;
}

/*
 * Pin npages from start into pages; all or nothing. The whole range is
 * checked before anything is pinned, then each batch is checked again
 * under the same hold of the mmap lock as its pin, so no mapping can be
 * swapped in between the check and the pin. Each batch holds one of the
 * device's pin slots until its pages' pin counts are checked and, when
 * one is over the limit, the batch is unpinned again (see HAC_PIN_SLOTS).
 */
static int hac_pin_pages(struct hac_device *hdev, unsigned long start,
			 unsigned long npages, struct page **pages)
{
	struct mm_struct *mm = current->mm;
	unsigned long done = 0;
	long ret;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = hac_check_vmas(mm, start, start + (npages << PAGE_SHIFT));
	mmap_read_unlock(mm);
	if (ret)
		return ret;

	while (done < npages) {
		unsigned long addr = start + (done << PAGE_SHIFT);
		unsigned long want = min_t(unsigned long, npages - done,
					   HAC_PIN_BATCH);

		if (down_killable(&hdev->pin_slots)) {
			ret = -EINTR;
			goto err_unpin;
		}
		if (mmap_read_lock_killable(mm)) {
			up(&hdev->pin_slots);
			ret = -EINTR;
			goto err_unpin;
		}
		ret = hac_check_vmas(mm, addr, addr + (want << PAGE_SHIFT));
		if (!ret)
			ret = hac_pin_user_pages(addr, want, pages + done);
		mmap_read_unlock(mm);
		if (ret > 0 && hac_pins_over_limit(hdev, pages + done, ret)) {
			unpin_user_pages(pages + done, ret);
			ret = -EOVERFLOW;
		}
		up(&hdev->pin_slots);
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

	ret = hac_pin_pages(hdev, addr, npages, bo->pages);
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
	if (args->node == HACCEL_DRM_NODE_ANY) {
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
