// SPDX-License-Identifier: MIT
/*
 * NUMA topology from sysfs: nodes with their CPUs and memory, the node of a
 * PCI device, and running a thread on a node's CPUs.
 *
 * Everything is read under ctx->sysfs_root, never from libnuma's view of
 * the machine, so tests can point $HACCEL_SYSFS_ROOT at a fixture tree and
 * drive multi-node logic on a one-node machine. Nothing is cached: the
 * files are small and read only at set-up time, and a cache would go stale
 * across CPU or memory hotplug.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "hostmem.h"

/* Node ids the kernel can use (NODES_SHIFT is at most 10). */
#define TOPO_MAX_NODE_IDS 1024
/* A cpulist of 1024 CPUs written one by one ("0,2,4,...") stays below this. */
#define TOPO_TEXT_MAX 8192

/*
 * Read a small sysfs file into buf, NUL terminated. Returns its length
 * (the bytes read, which may hold NUL bytes of their own: callers that
 * parse text check), or -errno (-ENOENT when missing, -EFBIG when it does
 * not fit: more than len - 1 bytes). No message: the caller knows what a
 * missing file means.
 */
static int read_text(const struct haccel_ctx *ctx, char *buf, size_t len,
		     char *path, size_t path_len, const char *rel)
{
	size_t got = 0;
	int fd;

	haccel__sysfs_path(ctx, path, path_len, "%s", rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		/* Full: one more byte tells a file of exactly len - 1 bytes
		 * (EOF next) from a longer one. */
		bool full = got == len - 1;
		char extra;
		ssize_t n = full ? read(fd, &extra, 1) : read(fd, buf + got, len - 1 - got);

		if (n < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		if (full) {
			close(fd);
			return -EFBIG;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (int)got;
}

/*
 * Parse an unsigned decimal at *s and advance *s past all its digits.
 * Returns -1 when there is none, and HACCEL_MAX_CPUS for any number that
 * large or larger, however many digits it has (the caller names it).
 */
static long parse_cpu(const char **s)
{
	long v = 0;

	if (!isdigit((unsigned char)**s))
		return -1;
	for (; isdigit((unsigned char)**s); (*s)++)
		if (v < HACCEL_MAX_CPUS)
			v = v * 10 + (**s - '0');
	return v < HACCEL_MAX_CPUS ? v : HACCEL_MAX_CPUS;
}

/* A CPU number, the digits [start, end), too large; returns -ERANGE. */
static int cpu_too_large(const char *start, const char *end, char *why, size_t len)
{
	int n = (int)(end - start);

	snprintf(why, len, "CPU %.*s%s is beyond the %d CPUs this build describes (HACCEL_MAX_CPUS)",
		 n > 24 ? 24 : n, start, n > 24 ? "..." : "", HACCEL_MAX_CPUS);
	return -ERANGE;
}

/* Say where a cpulist (text to end) stops making sense; returns -EBADMSG. */
static int cpulist_bad(const char *text, const char *end, const char *s, char *why,
		       size_t len)
{
	char what[8];

	if (s == end)
		snprintf(what, sizeof(what), "end");
	else if (*s == '\n')
		snprintf(what, sizeof(what), "'\\n'");
	else if (isprint((unsigned char)*s))
		snprintf(what, sizeof(what), "'%c'", *s);
	else
		snprintf(what, sizeof(what), "0x%02x", (unsigned char)*s);
	snprintf(why, len, "unexpected %s at column %d (want \"0-3,8,10-11\")",
		 what, (int)(s - text) + 1);
	return -EBADMSG;
}

/*
 * Parse the kernel's cpulist syntax ("0-3,8,10-11", one trailing newline,
 * empty for a memory-only node) from the len bytes of text (NUL terminated
 * after them) into mask. Strict: no spaces, no empty items, no reversed
 * ranges, no stride syntax, no NUL byte, since sysfs never writes them and
 * accepting junk would bind threads to the wrong CPUs. Returns 0, -EBADMSG
 * or -ERANGE (a CPU >= HACCEL_MAX_CPUS) with why set.
 */
static int parse_cpulist(const char *text, size_t len, uint64_t *mask, uint32_t *n_cpus,
			 char *why, size_t why_len)
{
	const char *s = text, *end = text + len, *nul = memchr(text, '\0', len);

	memset(mask, 0, HACCEL_MAX_CPUS / 8);
	*n_cpus = 0;
	/* Past the first NUL a C string would see no more: refuse it. */
	if (nul)
		return cpulist_bad(text, end, nul, why, why_len);
	if (*s == '\n' && s[1] == '\0')
		return 0;
	if (*s == '\0')
		return 0;
	for (;;) {
		const char *start = s;
		long a, b;

		a = parse_cpu(&s);
		if (a < 0)
			return cpulist_bad(text, end, s, why, why_len);
		if (a >= HACCEL_MAX_CPUS)
			return cpu_too_large(start, s, why, why_len);
		b = a;
		if (*s == '-') {
			start = ++s;
			b = parse_cpu(&s);
			if (b < 0)
				return cpulist_bad(text, end, s, why, why_len);
			if (b >= HACCEL_MAX_CPUS)
				return cpu_too_large(start, s, why, why_len);
			if (b < a) {
				snprintf(why, why_len, "reversed range %ld-%ld", a, b);
				return -EBADMSG;
			}
		}
		for (long c = a; c <= b; c++) {
			uint64_t bit = 1ull << (c % 64);

			if (mask[c / 64] & bit) {
				snprintf(why, why_len, "CPU %ld listed twice", c);
				return -EBADMSG;
			}
			mask[c / 64] |= bit;
			(*n_cpus)++;
		}
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s == '\n' && s[1] == '\0')
			return 0;
		if (*s == '\0')
			return 0;
		return cpulist_bad(text, end, s, why, why_len);
	}
}

static int read_cpulist(struct haccel_ctx *ctx, const char *rel,
			struct haccel_numa_node *n)
{
	char buf[TOPO_TEXT_MAX], path[512], why[160];
	int ret;

	ret = read_text(ctx, buf, sizeof(buf), path, sizeof(path), rel);
	if (ret == -EFBIG)
		return haccel__fail(ctx, -EBADMSG, "numa: %s is longer than %d bytes",
				    path, TOPO_TEXT_MAX - 1);
	if (ret < 0)
		return haccel__fail(ctx, ret, "numa: cannot read %s: %s", path,
				    strerror(-ret));
	ret = parse_cpulist(buf, (size_t)ret, n->cpus, &n->n_cpus, why, sizeof(why));
	if (ret)
		return haccel__fail(ctx, ret, "numa: %s cpulist in %s: %s",
				    ret == -ERANGE ? "unusable" : "malformed", path, why);
	return 0;
}

/*
 * Find "field:" in a node meminfo ("Node 0 MemTotal:  4810528 kB") and
 * return its value in bytes through *bytes. A missing field leaves *bytes
 * alone (0: sysfs does not say); a present but malformed one is -EBADMSG.
 */
static int meminfo_field(const char *text, const char *field, uint64_t *bytes)
{
	const char *p = strstr(text, field);
	unsigned long long kb;
	char *end;

	if (!p)
		return 0;
	p += strlen(field);
	while (*p == ' ' || *p == '\t')
		p++;
	if (!isdigit((unsigned char)*p))
		return -EBADMSG;
	errno = 0;
	kb = strtoull(p, &end, 10);
	if (errno || strncmp(end, " kB", 3) || kb > UINT64_MAX / 1024)
		return -EBADMSG;
	*bytes = (uint64_t)kb * 1024;
	return 0;
}

static int read_meminfo(struct haccel_ctx *ctx, int id, struct haccel_numa_node *n)
{
	char buf[TOPO_TEXT_MAX], path[512], rel[96];
	int ret;

	snprintf(rel, sizeof(rel), "devices/system/node/node%d/meminfo", id);
	ret = read_text(ctx, buf, sizeof(buf), path, sizeof(path), rel);
	/* Memory sizes are informative (messages, doctor): absent is 0. */
	if (ret == -ENOENT)
		return 0;
	if (ret == -EFBIG)
		return haccel__fail(ctx, -EBADMSG, "numa: %s is longer than %d bytes",
				    path, TOPO_TEXT_MAX - 1);
	if (ret < 0)
		return haccel__fail(ctx, ret, "numa: cannot read %s: %s", path,
				    strerror(-ret));
	if (meminfo_field(buf, "MemTotal:", &n->mem_total) ||
	    meminfo_field(buf, "MemFree:", &n->mem_free))
		return haccel__fail(ctx, -EBADMSG,
				    "numa: malformed MemTotal or MemFree line in %s (want \"Node %d MemTotal: <n> kB\")",
				    path, id);
	return 0;
}

static int read_node(struct haccel_ctx *ctx, int id, struct haccel_numa_node *n)
{
	char rel[96];
	int ret;

	memset(n, 0, sizeof(*n));
	n->id = id;
	snprintf(rel, sizeof(rel), "devices/system/node/node%d/cpulist", id);
	ret = read_cpulist(ctx, rel, n);
	if (ret)
		return ret;
	return read_meminfo(ctx, id, n);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/*
 * The id of a "node<N>" directory, N decimal without sign or leading
 * zeros; -1 for any other name, TOPO_MAX_NODE_IDS for an id that large or
 * larger (however many digits).
 */
static int node_dir_id(const char *name)
{
	const char *p = name + 4;
	long id = 0;

	if (strncmp(name, "node", 4) || !isdigit((unsigned char)*p) ||
	    (*p == '0' && p[1]))
		return -1;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		if (id < TOPO_MAX_NODE_IDS)
			id = id * 10 + (*p - '0');
	}
	return id < TOPO_MAX_NODE_IDS ? (int)id : TOPO_MAX_NODE_IDS;
}

/*
 * Ids of the nodes under devices/system/node, sorted, into ids (NULL: only
 * count them). Returns their number, 0 when the directory is absent (a
 * kernel without NUMA) or holds no node directory, or -errno with a
 * message: -ERANGE for a node id the kernel cannot have, which a node list
 * without it would misdescribe.
 */
static int list_node_ids(struct haccel_ctx *ctx, int *ids)
{
	char path[512];
	struct dirent *d;
	int n = 0;
	DIR *dir;

	haccel__sysfs_path(ctx, path, sizeof(path), "devices/system/node");
	dir = opendir(path);
	if (!dir) {
		int e = errno;

		if (e == ENOENT)
			return 0;
		return haccel__fail(ctx, -e, "numa: cannot list %s: %s", path,
				    strerror(e));
	}
	while ((d = readdir(dir))) {
		int id = node_dir_id(d->d_name);

		if (id == TOPO_MAX_NODE_IDS) {
			int ret = haccel__fail(ctx, -ERANGE,
					       "numa: %s/%.64s: beyond the %d node ids a kernel can have (NODES_SHIFT is at most 10)",
					       path, d->d_name, TOPO_MAX_NODE_IDS);

			closedir(dir);
			return ret;
		}
		/* Ids are distinct and below TOPO_MAX_NODE_IDS: ids has room. */
		if (id >= 0 && n < TOPO_MAX_NODE_IDS) {
			if (ids)
				ids[n] = id;
			n++;
		}
	}
	closedir(dir);
	if (ids)
		qsort(ids, (size_t)n, sizeof(ids[0]), cmp_int);
	return n;
}

/*
 * Without devices/system/node, or with one that holds no node<N> directory,
 * the kernel has no NUMA: everything is node 0, with every online CPU and
 * no memory figures (sysfs does not give them).
 */
static int read_flat_node(struct haccel_ctx *ctx, struct haccel_numa_node *n)
{
	int ret;

	memset(n, 0, sizeof(*n));
	ret = read_cpulist(ctx, "devices/system/cpu/online", n);
	if (ret == -ENOENT) {
		char path[512];

		haccel__sysfs_path(ctx, path, sizeof(path), "devices/system");
		return haccel__fail(ctx, -ENOENT,
				    "numa: neither node/ nor cpu/online under %s: is sysfs mounted (or $HACCEL_SYSFS_ROOT right)?",
				    path);
	}
	return ret;
}

int haccel_numa_nodes(struct haccel_ctx *ctx, struct haccel_numa_node *nodes,
		      uint32_t max)
{
	int *ids, n, ret;

	if (!ctx)
		return -EINVAL;
	if (!nodes && max)
		return haccel__fail(ctx, -EINVAL, "numa: nodes is NULL but max is %u", max);

	ids = malloc(TOPO_MAX_NODE_IDS * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	n = list_node_ids(ctx, ids);
	if (n < 0) {
		ret = n;
		goto out;
	}
	if (n == 0) {
		if (max) {
			ret = read_flat_node(ctx, &nodes[0]);
			if (ret)
				goto out;
		} else {
			struct haccel_numa_node flat;

			/* Still check that sysfs is there: 1 must mean 1. */
			ret = read_flat_node(ctx, &flat);
			if (ret)
				goto out;
		}
		ret = 1;
		goto out;
	}
	for (int i = 0; i < n && (uint32_t)i < max; i++) {
		ret = read_node(ctx, ids[i], &nodes[i]);
		if (ret)
			goto out;
	}
	ret = n;
out:
	free(ids);
	return ret;
}

/*
 * Describe node id alone (bind_thread needs one node, not all), as
 * haccel_numa_nodes() would: node 0 is the flat node where there are no
 * node directories. Returns 0, -ENODEV when there is no such node, or
 * -errno; each with a message.
 */
static int numa_node_get(struct haccel_ctx *ctx, int id, struct haccel_numa_node *out)
{
	char path[512], rel[64];

	if (id < 0 || id >= TOPO_MAX_NODE_IDS)
		return haccel__fail(ctx, -ENODEV, "numa: no node %d", id);
	snprintf(rel, sizeof(rel), "devices/system/node/node%d", id);
	haccel__sysfs_path(ctx, path, sizeof(path), "%s", rel);
	if (access(path, F_OK) == 0)
		return read_node(ctx, id, out);
	if (id == 0) {
		/* The flat node 0 haccel_numa_nodes() reports without NUMA. */
		int n = list_node_ids(ctx, NULL);

		if (n < 0)
			return n;
		if (n == 0)
			return read_flat_node(ctx, out);
	}
	haccel__sysfs_path(ctx, path, sizeof(path), "devices/system/node");
	return haccel__fail(ctx, -ENODEV, "numa: no node %d under %s", id, path);
}

static int hex_digits(const char **s, int min, int max, unsigned long *v)
{
	int n = 0;

	*v = 0;
	while (isxdigit((unsigned char)**s) && n < max) {
		int c = tolower((unsigned char)**s);

		*v = *v * 16 + (unsigned long)(isdigit(c) ? c - '0' : c - 'a' + 10);
		(*s)++;
		n++;
	}
	return n >= min && !isxdigit((unsigned char)**s) ? 0 : -1;
}

/*
 * Parse "[dddd:]bb:dd.f" into the kernel's own device name, "%04x:%02x:%02x.%x".
 * The domain takes 1 to 8 digits: CUDA writes 4 ("0000:3B:00.0"), NVML 8
 * ("00000000:3B:00.0"), and VMD domains beyond 0xffff print with 5.
 */
static int pci_name(const char *id, char *out, size_t len)
{
	unsigned long dom = 0, bus, dev, fn;
	const char *s = id, *colon = strchr(id, ':');

	if (colon && strchr(colon + 1, ':')) {
		if (hex_digits(&s, 1, 8, &dom) || *s++ != ':')
			return -EINVAL;
	}
	if (hex_digits(&s, 2, 2, &bus) || *s++ != ':' ||
	    hex_digits(&s, 2, 2, &dev) || *s++ != '.' ||
	    hex_digits(&s, 1, 1, &fn) || *s != '\0')
		return -EINVAL;
	if (dev > 0x1f || fn > 7)
		return -EINVAL;
	snprintf(out, len, "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
	return 0;
}

/*
 * A numa_node file's len bytes: "-1" or a node id, as the kernel writes
 * them: an optional '-', decimal digits and at most one trailing newline;
 * no spaces, '+' or NUL. Returns 0 with *v set, or -1.
 */
static int parse_node_number(const char *text, size_t len, long *v)
{
	const char *s = text, *end = text + len;
	bool neg = false;
	long id = 0;

	if (s < end && end[-1] == '\n')
		end--;
	if (s < end && *s == '-') {
		neg = true;
		s++;
	}
	if (s == end)
		return -1;
	for (; s < end; s++) {
		if (!isdigit((unsigned char)*s))
			return -1;
		if (id < TOPO_MAX_NODE_IDS)
			id = id * 10 + (*s - '0');
	}
	if (neg)
		id = -id;
	if (id < -1 || id >= TOPO_MAX_NODE_IDS)
		return -1;
	*v = id;
	return 0;
}

int haccel_numa_node_of_pci(struct haccel_ctx *ctx, const char *bus_id, int *node)
{
	char name[32], rel[96], path[512], buf[64];
	long v;
	int ret;

	if (!ctx)
		return -EINVAL;
	if (!bus_id || !node)
		return haccel__fail(ctx, -EINVAL, "numa: NULL bus id or node");
	if (strlen(bus_id) > 20 || pci_name(bus_id, name, sizeof(name)))
		return haccel__fail(ctx, -EINVAL,
				    "numa: malformed PCI bus id \"%.40s\" (want [dddd:]bb:dd.f in hex, device <= 1f, function <= 7)",
				    bus_id);
	snprintf(rel, sizeof(rel), "bus/pci/devices/%s/numa_node", name);
	ret = read_text(ctx, buf, sizeof(buf), path, sizeof(path), rel);
	if (ret == -ENOENT)
		return haccel__fail(ctx, -ENOENT, "numa: no PCI device %s (%s missing)",
				    name, path);
	if (ret == -EFBIG)
		return haccel__fail(ctx, -EBADMSG, "numa: %s is too long", path);
	if (ret < 0)
		return haccel__fail(ctx, ret, "numa: cannot read %s: %s", path,
				    strerror(-ret));
	if (parse_node_number(buf, (size_t)ret, &v))
		return haccel__fail(ctx, -EBADMSG,
				    "numa: %s holds \"%.20s\", not a node number or -1",
				    path, buf);
	*node = (int)v;
	return 0;
}

int haccel__numa_bind_thread(struct haccel_ctx *ctx, int node)
{
	struct haccel_numa_node n;
	cpu_set_t set;
	int ret;

	if (node == HACCEL_NODE_ANY)
		return 0;
	ret = numa_node_get(ctx, node, &n);
	if (ret)
		return ret;
	if (!n.n_cpus)
		return haccel__fail(ctx, -ENODEV,
				    "numa: node %d has no CPUs to run a thread on", node);
	CPU_ZERO(&set);
	for (int c = 0; c < HACCEL_MAX_CPUS && c < CPU_SETSIZE; c++)
		if (n.cpus[c / 64] & (1ull << (c % 64)))
			CPU_SET(c, &set);
	ret = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (ret)
		return haccel__fail(ctx, -ret,
				    "numa: cannot run this thread on node %d's %u CPUs: %s%s",
				    node, n.n_cpus, strerror(ret),
				    ret == EINVAL ? " (none of them online or in this process's cpuset)" : "");
	haccel__dbg(ctx, "numa: thread bound to node %d (%u CPUs)", node, n.n_cpus);
	return 0;
}
