// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs: <debugfs>/haccel/clients lists every client still charged for
 * something (pid, command, state, buffers, bytes per node), and
 * <debugfs>/haccel/nodes each node's usage and limits. For people, not
 * programs: STATS and QUOTA_GET are the interface.
 */

#include <linux/debugfs.h>
#include <linux/nodemask.h>
#include <linux/seq_file.h>

#include "hac_drv.h"

static void hac_debugfs_node_header(struct seq_file *m)
{
	int nid;

	for (nid = 0; nid < nr_node_ids; nid++)
		seq_printf(m, " %14s%d", "node", nid);
	seq_putc(m, '\n');
}

static int hac_clients_show(struct seq_file *m, void *unused)
{
	struct hac_device *hdev = m->private;
	struct hac_client *client;
	int nid;

	seq_printf(m, "%8s %-16s %-6s %8s", "pid", "command", "state", "bos");
	hac_debugfs_node_header(m);

	/* seq_printf() only fills the seq_file buffer: fine under a spinlock. */
	spin_lock(&hdev->lock);
	list_for_each_entry(client, &hdev->clients, link) {
		seq_printf(m, "%8d %-16s %-6s %8llu", client->pid, client->comm,
			   client->closed ? "closed" : "open", client->nbos);
		for (nid = 0; nid < nr_node_ids; nid++)
			seq_printf(m, " %15llu", client->used[nid]);
		seq_putc(m, '\n');
	}
	spin_unlock(&hdev->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hac_clients);

static int hac_nodes_show(struct seq_file *m, void *unused)
{
	struct hac_device *hdev = m->private;
	int nid;

	seq_printf(m, "%4s %20s %20s %20s\n", "node", "pinned", "node_limit",
		   "client_limit");
	spin_lock(&hdev->lock);
	for (nid = 0; nid < nr_node_ids; nid++)
		seq_printf(m, "%4d %20llu %20llu %20llu\n", nid,
			   hdev->node_used[nid], hdev->node_limit[nid],
			   hdev->client_limit[nid]);
	spin_unlock(&hdev->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hac_nodes);

/* debugfs failures are not errors: the driver works without it. */
void hac_debugfs_init(struct hac_device *hdev)
{
	hdev->debugfs = debugfs_create_dir(HACCEL_DRIVER_NAME, NULL);
	debugfs_create_file("clients", 0444, hdev->debugfs, hdev,
			    &hac_clients_fops);
	debugfs_create_file("nodes", 0444, hdev->debugfs, hdev,
			    &hac_nodes_fops);
}

void hac_debugfs_fini(struct hac_device *hdev)
{
	debugfs_remove_recursive(hdev->debugfs);
}
