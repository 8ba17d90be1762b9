// SPDX-License-Identifier: GPL-2.0
/*
 * Accounting: who pinned how much on which node, the limits, and the
 * STATS and QUOTA ioctls. One spinlock (hac_device.lock) covers every
 * counter and limit, so a check-and-charge over all nodes is atomic and
 * the counts are exact however many clients pin at once.
 */

#include <linux/capability.h>
#include <linux/mmzone.h>
#include <linux/nodemask.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_file.h>
#include <drm/drm_managed.h>

#include "hac_drv.h"

int hac_quota_init(struct hac_device *hdev, unsigned int node_pct,
		   unsigned int client_pct)
{
	int nid;

	spin_lock_init(&hdev->lock);
	INIT_LIST_HEAD(&hdev->clients);

	hdev->node_used = drmm_kcalloc(&hdev->drm, nr_node_ids,
				       sizeof(u64), GFP_KERNEL);
	hdev->node_limit = drmm_kcalloc(&hdev->drm, nr_node_ids,
					sizeof(u64), GFP_KERNEL);
	hdev->client_limit = drmm_kcalloc(&hdev->drm, nr_node_ids,
					  sizeof(u64), GFP_KERNEL);
	if (!hdev->node_used || !hdev->node_limit || !hdev->client_limit)
		return -ENOMEM;

	/* Offline nodes keep a limit of 0: nothing can be pinned there. */
	for_each_online_node(nid) {
		u64 bytes = (u64)node_present_pages(nid) << PAGE_SHIFT;

		hdev->node_limit[nid] = div_u64(bytes, 100) * node_pct;
		hdev->client_limit[nid] = div_u64(bytes, 100) * client_pct;
	}
	return 0;
}

struct hac_client *hac_client_create(struct hac_device *hdev)
{
	struct hac_client *client;

	client = kzalloc(struct_size(client, used, nr_node_ids),
			 GFP_KERNEL_ACCOUNT);
	if (!client)
		return ERR_PTR(-ENOMEM);

	client->hdev = hdev;
	client->refs = 1;
	client->pid = task_tgid_nr(current);
	get_task_comm(client->comm, current);

	spin_lock(&hdev->lock);
	list_add_tail(&client->link, &hdev->clients);
	spin_unlock(&hdev->lock);
	return client;
}

/* Drop one reference; called with hdev->lock held. True if it was the last. */
static bool hac_client_put_locked(struct hac_client *client)
{
	if (--client->refs)
		return false;
	list_del(&client->link);
	return true;
}

void hac_client_close(struct hac_client *client)
{
	struct hac_device *hdev = client->hdev;
	bool last;

	spin_lock(&hdev->lock);
	client->closed = true;
	last = hac_client_put_locked(client);
	spin_unlock(&hdev->lock);
	if (last)
		kfree(client);
}

static u64 hac_room(u64 used, u64 limit)
{
	return used < limit ? limit - used : 0;
}

/* What the client may still pin on nid; called with hdev->lock held. */
static u64 hac_node_room(struct hac_client *client, int nid)
{
	struct hac_device *hdev = client->hdev;

	return min(hac_room(hdev->node_used[nid], hdev->node_limit[nid]),
		   hac_room(client->used[nid], hdev->client_limit[nid]));
}

/*
 * Fail early, before any page is pinned, when size cannot fit: on the
 * expected node if one is given, else on all nodes together. Only a hint:
 * hac_quota_charge() decides once the pages' nodes are known.
 */
int hac_quota_precheck(struct hac_client *client, u32 node, u64 size)
{
	struct hac_device *hdev = client->hdev;
	u64 room = 0;
	int nid;

	spin_lock(&hdev->lock);
	if (node != HACCEL_DRM_NODE_ANY) {
		room = hac_node_room(client, node);
	} else {
		for (nid = 0; nid < nr_node_ids && room < size; nid++)
			if (check_add_overflow(room, hac_node_room(client, nid),
					       &room))
				room = U64_MAX;
	}
	spin_unlock(&hdev->lock);
	return room < size ? -EDQUOT : 0;
}

/*
 * Charge a new buffer's pages to the client and the nodes, all or nothing.
 * On success the buffer holds a reference on the client, which
 * hac_quota_uncharge() drops.
 */
int hac_quota_charge(struct hac_client *client, const u64 *node_pages)
{
	struct hac_device *hdev = client->hdev;
	int nid;

	spin_lock(&hdev->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		u64 bytes = node_pages[nid] << PAGE_SHIFT;

		if (bytes && bytes > hac_node_room(client, nid)) {
			spin_unlock(&hdev->lock);
			return -EDQUOT;
		}
	}
	for (nid = 0; nid < nr_node_ids; nid++) {
		u64 bytes = node_pages[nid] << PAGE_SHIFT;

		hdev->node_used[nid] += bytes;
		client->used[nid] += bytes;
	}
	hdev->nbos++;
	client->nbos++;
	client->refs++;
	spin_unlock(&hdev->lock);
	return 0;
}

void hac_quota_uncharge(struct hac_client *client, const u64 *node_pages)
{
	struct hac_device *hdev = client->hdev;
	bool last;
	int nid;

	spin_lock(&hdev->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		u64 bytes = node_pages[nid] << PAGE_SHIFT;

		hdev->node_used[nid] -= bytes;
		client->used[nid] -= bytes;
	}
	hdev->nbos--;
	client->nbos--;
	last = hac_client_put_locked(client);
	spin_unlock(&hdev->lock);
	if (last)
		kfree(client);
}

/* Write min(count, nr_node_ids) values to a user array; uptr 0 skips. */
int hac_copy_nodes_to_user(u64 uptr, u32 count, const u64 *vals)
{
	size_t n = min_t(size_t, count, nr_node_ids);

	if (!uptr || !n)
		return 0;
	if (copy_to_user(u64_to_user_ptr(uptr), vals, n * sizeof(u64)))
		return -EFAULT;
	return 0;
}

int hac_stats_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct hac_device *hdev = to_hac_dev(drm);
	struct hac_client *client = file->driver_priv;
	struct drm_haccel_stats *args = data;
	u64 *node_bytes, *client_bytes;
	u64 node_total = 0, client_total = 0, node_bos, client_bos;
	int nid, ret;

	if (args->flags)
		return -EINVAL;

	node_bytes = kcalloc(2 * nr_node_ids, sizeof(u64), GFP_KERNEL);
	if (!node_bytes)
		return -ENOMEM;
	client_bytes = node_bytes + nr_node_ids;

	spin_lock(&hdev->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		node_bytes[nid] = hdev->node_used[nid];
		client_bytes[nid] = client->used[nid];
		node_total += node_bytes[nid];
		client_total += client_bytes[nid];
	}
	node_bos = hdev->nbos;
	client_bos = client->nbos;
	spin_unlock(&hdev->lock);

	ret = hac_copy_nodes_to_user(args->node_bytes, args->num_nodes,
				     node_bytes);
	if (!ret)
		ret = hac_copy_nodes_to_user(args->client_bytes,
					     args->num_nodes, client_bytes);
	kfree(node_bytes);
	if (ret)
		return ret;

	args->num_nodes = nr_node_ids;
	args->node_total = node_total;
	args->client_total = client_total;
	args->node_bos = node_bos;
	args->client_bos = client_bos;
	return 0;
}

static bool hac_node_valid(u32 node)
{
	return node < nr_node_ids && node_online(node);
}

int hac_quota_get_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct hac_device *hdev = to_hac_dev(drm);
	struct drm_haccel_quota *args = data;

	if (args->flags || !hac_node_valid(args->node))
		return -EINVAL;

	spin_lock(&hdev->lock);
	args->node_limit = hdev->node_limit[args->node];
	args->client_limit = hdev->client_limit[args->node];
	spin_unlock(&hdev->lock);
	return 0;
}

int hac_quota_set_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct hac_device *hdev = to_hac_dev(drm);
	struct drm_haccel_quota *args = data;
	int nid;

	if (args->flags ||
	    (args->node != HACCEL_DRM_NODE_ANY && !hac_node_valid(args->node)))
		return -EINVAL;
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;

	spin_lock(&hdev->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		if (args->node == HACCEL_DRM_NODE_ANY ? !node_online(nid) :
		    nid != args->node)
			continue;
		hdev->node_limit[nid] = args->node_limit;
		hdev->client_limit[nid] = args->client_limit;
	}
	spin_unlock(&hdev->lock);
	return 0;
}
