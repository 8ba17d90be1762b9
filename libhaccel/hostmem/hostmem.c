// SPDX-License-Identifier: MIT
/*
 * Pinned host staging memory: anonymous memory mapped, bound to a NUMA
 * node, faulted in, checked and pinned, in that order, each step failing
 * with a message that names the limit and how to raise it. Pinning is
 * mlock() (the "user" provider) or, where haccel.ko is loaded and
 * compatible, a long-term pin by the driver (the "driver" provider,
 * driver.c), which charges the pages to node-wide quotas.
 *
 * Why this order:
 *  - mbind() comes before any page exists: a binding only steers future
 *    faults (MPOL_MF_STRICT without MOVE does not migrate), so binding after
 *    populating would leave the pages wherever they first landed.
 *  - Populating (MADV_POPULATE_WRITE) comes before mlock(), so that running
 *    out of memory on the node and being refused a lock are two different
 *    errors with two different fixes; mlock() then only locks pages that
 *    are already there.
 *  - Placement is checked on a sample of pages after populating: MPOL_BIND
 *    makes a misplaced page unlikely, but a cpuset change racing with us or
 *    a kernel that ignores the policy would otherwise go unnoticed, and the
 *    whole point of the buffer is to sit next to the GPU it feeds.
 *
 * Registration (done elsewhere, recorded here by design):
 *  - CUDA: the GPU backend registers a buffer with cuMemHostRegister() in
 *    pieces of at most HACCEL__CUDA_REGISTER_CHUNK bytes (hostmem.h), one
 *    call per piece, and counts each with haccel__hostmem_note_registration
 *    (HACCEL__REG_CUDA). One call over hundreds of GB stalls for minutes
 *    and fails as a whole; bounded pieces keep progress visible and a
 *    failure local, and copies that cross a piece boundary are split by the
 *    backend. The pages are already resident and locked, so registering
 *    only builds the GPU's mappings.
 *  - io_uring: the loader registers buffers as fixed buffers
 *    (io_uring_register_buffers) and counts them with HACCEL__REG_IO_URING.
 *    io_uring pins user pages with pin_user_pages(), which accepts this
 *    anonymous (or hugetlb) memory but refuses what cuMemHostAlloc()
 *    returns: that is a VM_IO/VM_PFNMAP mapping of the NVIDIA device file
 *    with no struct pages to pin. That is why staging memory is allocated
 *    here and registered with CUDA afterwards, never allocated by CUDA.
 */
#include "config.h"

#include <errno.h>
#include <numaif.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"
#include "driver.h"
#include "hostmem.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif

#define HOSTMEM_FLAGS                                                         \
	(HACCEL_HOSTMEM_HUGETLB | HACCEL_HOSTMEM_NO_HUGE |                    \
	 HACCEL_HOSTMEM_ALLOW_UNPINNED | HACCEL_HOSTMEM_ALLOW_UNPLACED)
/* The params struct of the first release (bytes was its last field): every
 * caller passes at least this much. */
#define HOSTMEM_PARAMS_MIN_SIZE                                               \
	(offsetof(struct haccel_hostmem_params, bytes) + sizeof(uint64_t))

#define HUGE_2M (2ull << 20)
/* The largest user address space of any Linux: 2^56 bytes (x86-64 and
 * RISC-V with 5-level paging). */
#define ADDRESS_SPACE_MAX (1ull << 56)
#define GIB (1ull << 30)
#define CAP_IPC_LOCK_BIT 14
/* Bits in the mbind() node mask: every node id a kernel can have. */
#define MASK_BITS 1024
#define MASK_LONGS (MASK_BITS / (8 * sizeof(unsigned long)))
/* Pages whose node is checked per move_pages() call. */
#define VERIFY_BATCH 64

struct haccel_hostmem {
	struct haccel_ctx *ctx;      /* not owned: must outlive the buffer */
	/* Set by alloc, read-only after, so free subtracts what alloc added. */
	void *ptr;
	uint64_t bytes;              /* as requested */
	uint64_t mapped_bytes;       /* multiple of page_size; mlock/munmap length */
	uint64_t page_size;
	int32_t node;                /* bound and checked node, or -1 */
	uint32_t pinned;
	uint32_t huge;               /* enum haccel_huge_kind */
	uint32_t provider;           /* enum haccel_hostmem_provider */
	struct haccel__pins pins;    /* the driver's handles (provider DRIVER) */
};

/* What alloc found out along the way; lives for one call. */
struct hostmem_plan {
	struct haccel_hostmem_params p;
	uint32_t n_nodes;            /* nodes in sysfs, when a node was asked */
	bool bound;                  /* mbind() in effect (or trivially true) */
	bool check;                  /* placement can be checked by the kernel */
	bool fell_unplaced;
	bool fell_unpinned;
};

void haccel_hostmem_params_init(struct haccel_hostmem_params *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->node = HACCEL_NODE_ANY;
}

/* --- small readers for messages ------------------------------------------ */

/* A number from a one-value sysfs file under ctx->sysfs_root; -1 if none. */
static long long sysfs_num(struct haccel_ctx *ctx, const char *rel)
{
	char path[512];
	long long v;
	FILE *f;

	haccel__sysfs_path(ctx, path, sizeof(path), "%s", rel);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* A line "field: value" of /proc/self/status, as text; false if absent. */
static bool proc_status(const char *field, char *out, size_t len)
{
	char line[256];
	size_t n = strlen(field);
	bool found = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, field, n) && line[n] == ':') {
			const char *v = line + n + 1;

			v += strspn(v, " \t");
			snprintf(out, len, "%.*s", (int)strcspn(v, "\n"), v);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Describe one node (free memory for messages); -ENODEV if it is not there. */
static int node_describe(struct haccel_ctx *ctx, int node,
			 struct haccel_numa_node *out, uint32_t *n_nodes)
{
	struct haccel_numa_node *all;
	int n, ret;

	n = haccel_numa_nodes(ctx, NULL, 0);
	if (n < 0)
		return n;
	all = calloc((size_t)n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	ret = haccel_numa_nodes(ctx, all, (uint32_t)n);
	if (ret < 0)
		goto out;
	if (n_nodes)
		*n_nodes = (uint32_t)ret;
	ret = -ENODEV;
	for (int i = 0; i < n; i++) {
		if (all[i].id == node) {
			*out = all[i];
			ret = 0;
			break;
		}
	}
out:
	free(all);
	return ret;
}

/*
 * "node 1 has 3221225472 bytes free of ..." or what is known of it. Called
 * before the failure is stored, so a sysfs error here cannot replace it.
 */
static void free_memory_text(struct haccel_ctx *ctx, int node, char *buf,
			     size_t len)
{
	struct haccel_numa_node n;

	if (node >= 0 && node_describe(ctx, node, &n, NULL) == 0 && n.mem_total)
		snprintf(buf, len, "node %d has %llu bytes free of %llu", node,
			 (unsigned long long)n.mem_free,
			 (unsigned long long)n.mem_total);
	else if (node >= 0)
		snprintf(buf, len, "node %d's free memory is unknown", node);
	else
		snprintf(buf, len, "see MemAvailable in /proc/meminfo");
}

/*
 * Explain a shortage of 2 MiB huge pages: free vs needed, globally and on
 * the node, and the command that reserves more.
 */
static void hugetlb_text(struct haccel_ctx *ctx, int node, uint64_t need,
			 char *buf, size_t len)
{
	const char *pool = "kernel/mm/hugepages/hugepages-2048kB";
	long long nr, fr, rsv, nnr = -1, nfr = -1;
	char rel[160];

	/* No pool could serve it: say so rather than advise a huge echo. */
	if (need > ADDRESS_SPACE_MAX / HUGE_2M) {
		snprintf(buf, len,
			 "%llu 2 MiB pages are too large a request: more than any address space holds (64 PiB at most on Linux), so no huge page pool can serve it",
			 (unsigned long long)need);
		return;
	}
	snprintf(rel, sizeof(rel), "%s/nr_hugepages", pool);
	nr = sysfs_num(ctx, rel);
	snprintf(rel, sizeof(rel), "%s/free_hugepages", pool);
	fr = sysfs_num(ctx, rel);
	snprintf(rel, sizeof(rel), "%s/resv_hugepages", pool);
	rsv = sysfs_num(ctx, rel);
	if (nr < 0 || fr < 0) {
		snprintf(buf, len,
			 "this kernel has no 2 MiB huge page pool (%s/%s missing); use transparent huge pages (no HACCEL_HOSTMEM_HUGETLB)",
			 ctx->sysfs_root, pool);
		return;
	}
	if (rsv > 0 && rsv <= fr)
		fr -= rsv; /* free but promised to other mappings */
	if (node >= 0) {
		snprintf(rel, sizeof(rel),
			 "devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages", node);
		nnr = sysfs_num(ctx, rel);
		snprintf(rel, sizeof(rel),
			 "devices/system/node/node%d/hugepages/hugepages-2048kB/free_hugepages", node);
		nfr = sysfs_num(ctx, rel);
	}
	if (node >= 0 && nnr >= 0 && nfr >= 0)
		snprintf(buf, len,
			 "too few 2 MiB huge pages: need %llu, %lld free of %lld in the pool (node %d: %lld free of %lld); reserve more with `echo %llu > /sys/devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages` (or hugepages= on the kernel command line)",
			 (unsigned long long)need, fr, nr, node, nfr, nnr,
			 (unsigned long long)nnr + (need > (uint64_t)nfr ? need - (uint64_t)nfr : 0),
			 node);
	else
		snprintf(buf, len,
			 "too few 2 MiB huge pages: need %llu, %lld free of %lld in the pool; reserve more with `echo %llu > /proc/sys/vm/nr_hugepages` (vm.nr_hugepages in sysctl.conf, or hugepages= on the kernel command line)",
			 (unsigned long long)need, fr, nr,
			 (unsigned long long)nr + (need > (uint64_t)fr ? need - (uint64_t)fr : 0));
}

/* --- the steps ----------------------------------------------------------- */

static int check_params(struct haccel_ctx *ctx, struct hostmem_plan *pl)
{
	const struct haccel_hostmem_params *p = &pl->p;
	struct haccel_numa_node n;
	int ret;

	if (p->flags & ~HOSTMEM_FLAGS)
		return haccel__fail(ctx, -EINVAL, "hostmem: unknown flags 0x%x",
				    p->flags & ~HOSTMEM_FLAGS);
	if (p->reserved)
		return haccel__fail(ctx, -EINVAL, "hostmem: reserved field is %u, must be 0",
				    p->reserved);
	if (!p->bytes)
		return haccel__fail(ctx, -EINVAL, "hostmem: bytes is 0");
	if ((p->flags & HACCEL_HOSTMEM_HUGETLB) && (p->flags & HACCEL_HOSTMEM_NO_HUGE))
		return haccel__fail(ctx, -EINVAL,
				    "hostmem: HACCEL_HOSTMEM_HUGETLB and HACCEL_HOSTMEM_NO_HUGE contradict each other");
	/* Room for rounding to 2 MiB and for the alignment slack of the map. */
	if (p->bytes > UINT64_MAX - 2 * HUGE_2M || p->bytes > SIZE_MAX - 2 * HUGE_2M)
		return haccel__fail(ctx, -EINVAL, "hostmem: %llu bytes is larger than any address space",
				    (unsigned long long)p->bytes);
	if (p->node == HACCEL_NODE_ANY)
		return 0;
	if (p->node < 0 || p->node >= MASK_BITS)
		return haccel__fail(ctx, -ENODEV, "hostmem: node %d is neither a node id nor HACCEL_NODE_ANY",
				    p->node);
	ret = node_describe(ctx, p->node, &n, &pl->n_nodes);
	if (ret == -ENODEV) {
		char path[512];

		haccel__sysfs_path(ctx, path, sizeof(path), "devices/system/node");
		return haccel__fail(ctx, -ENODEV, "hostmem: no NUMA node %d (nodes are listed under %s)",
				    p->node, path);
	}
	return ret;
}

/*
 * Map at a 2 MiB boundary so transparent huge pages can back all of it: map
 * a little more, then unmap the unaligned head and the tail, which leaves
 * exactly [p, p + len) mapped.
 */
static void *map_aligned(size_t len)
{
	size_t slack = len + HUGE_2M;
	char *raw, *p;

	raw = mmap(NULL, slack, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return MAP_FAILED;
	p = (char *)(((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + slack > p + len)
		munmap(p + len, (size_t)(raw + slack - (p + len)));
	return p;
}

/* THP is "requested" only if the kernel would honour the request. */
static bool thp_enabled(struct haccel_ctx *ctx)
{
	char path[512], buf[128] = "";
	FILE *f;

	haccel__sysfs_path(ctx, path, sizeof(path), "kernel/mm/transparent_hugepage/enabled");
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

static int map_memory(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		      struct haccel_hostmem *m)
{
	const struct haccel_hostmem_params *p = &pl->p;
	char why[640];
	void *ptr;
	int e;

	if (p->flags & HACCEL_HOSTMEM_HUGETLB) {
		m->page_size = HUGE_2M;
		m->huge = HACCEL_HUGE_HUGETLB;
	} else {
		long pg = sysconf(_SC_PAGESIZE);

		m->page_size = pg > 0 ? (uint64_t)pg : 4096;
		m->huge = HACCEL_HUGE_NONE;
		if (!(p->flags & HACCEL_HOSTMEM_NO_HUGE) && thp_enabled(ctx))
			m->huge = HACCEL_HUGE_THP;
	}
	/* Exact: rounded to the page size only (a 60 GB request maps 60 GB). */
	haccel__align_u64(p->bytes, m->page_size, &m->mapped_bytes);

	if (m->huge == HACCEL_HUGE_HUGETLB)
		ptr = mmap(NULL, (size_t)m->mapped_bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB,
			   -1, 0);
	else if (!(p->flags & HACCEL_HOSTMEM_NO_HUGE) && m->mapped_bytes >= HUGE_2M)
		ptr = map_aligned((size_t)m->mapped_bytes);
	else
		ptr = mmap(NULL, (size_t)m->mapped_bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ptr == MAP_FAILED) {
		e = errno;
		if (m->huge == HACCEL_HUGE_HUGETLB) {
			hugetlb_text(ctx, p->node, m->mapped_bytes / HUGE_2M, why, sizeof(why));
			return haccel__fail(ctx, -ENOMEM,
					    "hostmem: cannot map %llu bytes of 2 MiB huge pages (mmap: %s): %s",
					    (unsigned long long)m->mapped_bytes, strerror(e), why);
		}
		return haccel__fail(ctx, -ENOMEM,
				    "hostmem: cannot map %llu bytes (mmap: %s): check ulimit -v and vm.overcommit_memory",
				    (unsigned long long)m->mapped_bytes, strerror(e));
	}
	m->ptr = ptr;

	/*
	 * Advice only, and given before any fault so the first faults already
	 * take huge pages (or never do). NO_HUGE asks for NOHUGEPAGE so that
	 * "4 KiB pages only" holds even where THP is "always".
	 */
	if (m->huge == HACCEL_HUGE_THP)
		(void)madvise(ptr, (size_t)m->mapped_bytes, MADV_HUGEPAGE);
	else if (p->flags & HACCEL_HOSTMEM_NO_HUGE)
		(void)madvise(ptr, (size_t)m->mapped_bytes, MADV_NOHUGEPAGE);
	return 0;
}

static const char *mbind_reason(int e)
{
	switch (e) {
	case EINVAL:
		return "the kernel has no memory on that node: it is offline, memory-less, or outside this process's cpuset (cpuset.mems)";
	case EPERM:
		return "refused: container seccomp profiles allow mbind only with CAP_SYS_NICE (docker run --cap-add SYS_NICE)";
	case ENOSYS:
		return "this kernel has no NUMA support";
	case ENOMEM:
		return "the kernel is out of memory for the policy itself";
	default:
		return "unexpected";
	}
}

static int place(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		 struct haccel_hostmem *m)
{
	const struct haccel_hostmem_params *p = &pl->p;
	/* One spare word: valgrind reads maxnode bits rounded up to a word. */
	unsigned long mask[MASK_LONGS + 1];
	int e;

	if (p->node == HACCEL_NODE_ANY)
		return 0;
	memset(mask, 0, sizeof(mask));
	mask[p->node / (8 * sizeof(unsigned long))] |=
		1ul << (p->node % (8 * sizeof(unsigned long)));
	/* The kernel reads maxnode - 1 bits (a historic off-by-one). */
	if (mbind(m->ptr, (unsigned long)m->mapped_bytes, MPOL_BIND, mask,
		  MASK_BITS + 1, MPOL_MF_STRICT) == 0) {
		pl->bound = true;
		pl->check = true;
		return 0;
	}
	e = errno;
	if (e == ENOSYS && pl->n_nodes == 1) {
		/* No NUMA in the kernel and one node in sysfs: node 0 is all
		 * the memory there is, so the binding holds by itself. */
		haccel__dbg(ctx, "hostmem: kernel without NUMA, node %d holds everything", p->node);
		pl->bound = true;
		return 0;
	}
	if (p->flags & HACCEL_HOSTMEM_ALLOW_UNPLACED) {
		haccel__warn(ctx, "hostmem: cannot bind %llu bytes to node %d (mbind: %s: %s); continuing unplaced (HACCEL_HOSTMEM_ALLOW_UNPLACED)",
			     (unsigned long long)m->mapped_bytes, p->node,
			     strerror(e), mbind_reason(e));
		pl->fell_unplaced = true;
		return 0;
	}
	return haccel__fail(ctx, e == EINVAL ? -ENODEV : -e,
			    "hostmem: cannot bind %llu bytes to node %d (mbind: %s): %s; pass HACCEL_HOSTMEM_ALLOW_UNPLACED to continue without placement",
			    (unsigned long long)m->mapped_bytes, p->node,
			    strerror(e), mbind_reason(e));
}

static int populate(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		    struct haccel_hostmem *m)
{
	int node = pl->bound ? pl->p.node : HACCEL_NODE_ANY;
	char why[640], where[32] = "";
	int e, again = 0;

	/*
	 * Interrupted (EINTR) or a kernel resource short for the moment
	 * (EAGAIN, madvise(2)): try again; pages faulted in already are not
	 * faulted twice. EAGAIN a bounded number of times, so that a kernel
	 * that keeps saying it cannot hang the allocation.
	 */
	for (;;) {
		if (madvise(m->ptr, (size_t)m->mapped_bytes, MADV_POPULATE_WRITE) == 0)
			return 0;
		e = errno;
		if (e != EINTR && (e != EAGAIN || ++again >= 100))
			break;
	}
	if (e == EINVAL) {
		/*
		 * Kernels before 5.14 lack POPULATE_WRITE: touch each page.
		 * A shortage then shows as SIGBUS (hugetlb) or the OOM killer
		 * instead of an error, which is why POPULATE_WRITE comes first.
		 */
		for (uint64_t off = 0; off < m->mapped_bytes; off += m->page_size)
			((volatile char *)m->ptr)[off] = 0;
		return 0;
	}
	if (m->huge == HACCEL_HUGE_HUGETLB)
		hugetlb_text(ctx, node, m->mapped_bytes / HUGE_2M, why, sizeof(why));
	else
		free_memory_text(ctx, node, why, sizeof(why));
	if (node >= 0)
		snprintf(where, sizeof(where), " on node %d", node);
	return haccel__fail(ctx, -ENOMEM,
			    "hostmem: cannot fault in %llu bytes%s (madvise POPULATE_WRITE: %s): %s, need %llu",
			    (unsigned long long)m->mapped_bytes, where, strerror(e),
			    why, (unsigned long long)m->mapped_bytes);
}

/* A sampled page is not on the node: fail, or go on unplaced if allowed. */
static int misplaced(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		     const struct haccel_hostmem *m, uint64_t off, int status)
{
	char what[160];

	if (status < 0)
		snprintf(what, sizeof(what), "page at offset %llu: the kernel cannot say which node holds it (move_pages: %s)",
			 (unsigned long long)off, strerror(-status));
	else
		snprintf(what, sizeof(what), "page at offset %llu of %llu landed on node %d, not node %d",
			 (unsigned long long)off,
			 (unsigned long long)m->mapped_bytes, status, pl->p.node);
	if (pl->p.flags & HACCEL_HOSTMEM_ALLOW_UNPLACED) {
		haccel__warn(ctx, "hostmem: %s; continuing unplaced (HACCEL_HOSTMEM_ALLOW_UNPLACED)",
			     what);
		pl->fell_unplaced = true;
		pl->bound = false;
		return 0;
	}
	return haccel__fail(ctx, -ENOMEM,
			    "hostmem: %s: the binding did not hold (cpuset change?); pass HACCEL_HOSTMEM_ALLOW_UNPLACED to accept it",
			    what);
}

/*
 * Ask the kernel which node holds the first page, the last, and one in each
 * GiB (move_pages() with no target nodes only reports).
 */
static int verify(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		  const struct haccel_hostmem *m)
{
	const uint64_t last = m->mapped_bytes - m->page_size;
	uint64_t off = 0;
	bool more = true;

	if (!pl->check)
		return 0;
	while (more) {
		void *pages[VERIFY_BATCH];
		int status[VERIFY_BATCH];
		unsigned long n;

		for (n = 0; n < VERIFY_BATCH && more; n++) {
			if (off >= last) {
				off = last;
				more = false;
			}
			pages[n] = (char *)m->ptr + off;
			off = (off / GIB + 1) * GIB;
		}
		if (move_pages(0, n, pages, NULL, status, 0)) {
			int e = errno;

			if (e == ENOSYS && pl->n_nodes == 1)
				return 0;
			return misplaced(ctx, pl, m, 0, -e);
		}
		for (unsigned long i = 0; i < n; i++)
			if (status[i] != pl->p.node)
				return misplaced(ctx, pl, m,
						 (uint64_t)((char *)pages[i] - (char *)m->ptr),
						 status[i]);
	}
	return 0;
}

/*
 * Explain a refused mlock(): the limit, what is locked already, what is
 * needed, the fix. Returns -EPERM when the limit or privilege refused it
 * (EPERM: limit 0; ENOMEM over a finite limit without CAP_IPC_LOCK), else
 * -ENOMEM (the kernel could not lock resident pages).
 */
static int lock_refusal(struct haccel_ctx *ctx, const struct haccel_hostmem *m,
			int e, char *buf, size_t len)
{
	char soft[32] = "unknown", hard[32] = "unknown", vmlck[32] = "", cap[32] = "";
	bool has_cap = false, finite = true;
	struct rlimit rl;
	int status;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY) {
			snprintf(soft, sizeof(soft), "unlimited");
			finite = false;
		} else {
			snprintf(soft, sizeof(soft), "%llu bytes", (unsigned long long)rl.rlim_cur);
		}
		if (rl.rlim_max == RLIM_INFINITY)
			snprintf(hard, sizeof(hard), "unlimited");
		else
			snprintf(hard, sizeof(hard), "%llu", (unsigned long long)rl.rlim_max);
	}
	if (proc_status("CapEff", cap, sizeof(cap)))
		has_cap = (strtoull(cap, NULL, 16) >> CAP_IPC_LOCK_BIT) & 1;
	if (proc_status("VmLck", vmlck, sizeof(vmlck))) {
		unsigned long long kb = strtoull(vmlck, NULL, 10);

		snprintf(vmlck, sizeof(vmlck), "%llu bytes", kb * 1024);
	} else {
		snprintf(vmlck, sizeof(vmlck), "an unknown number of bytes");
	}
	status = e == EPERM || (e == ENOMEM && finite && !has_cap) ? -EPERM : -ENOMEM;
	if (status == -EPERM)
		snprintf(buf, len,
			 "cannot lock %llu bytes (mlock: %s): RLIMIT_MEMLOCK soft limit is %s (hard %s), this process already has %s locked (VmLck), needs %llu more and has %sCAP_IPC_LOCK; raise the limit with ulimit -l, LimitMEMLOCK= in the systemd unit, or run with CAP_IPC_LOCK",
			 (unsigned long long)m->mapped_bytes, strerror(e), soft, hard,
			 vmlck, (unsigned long long)m->mapped_bytes,
			 has_cap ? "" : "no ");
	else
		snprintf(buf, len,
			 "cannot lock %llu bytes (mlock: %s) although the limit allows it (RLIMIT_MEMLOCK %s, %s CAP_IPC_LOCK, %s locked already): the kernel could not lock all pages",
			 (unsigned long long)m->mapped_bytes, strerror(e), soft,
			 has_cap ? "with" : "without", vmlck);
	return status;
}

/*
 * mlock(2) and munlock(2) as raw system calls: the ASan and TSan runtimes
 * replace the libc functions with no-ops that return 0, which would make a
 * sanitizer build report buffers as pinned that are not (and never meet
 * RLIMIT_MEMLOCK).
 */
static int sys_mlock(const void *addr, size_t len)
{
	return (int)syscall(SYS_mlock, addr, len);
}

static int sys_munlock(const void *addr, size_t len)
{
	return (int)syscall(SYS_munlock, addr, len);
}

/*
 * Pin through haccel.ko. A refusal never turns into an mlock(): that would
 * pin behind the node-wide quota's back, which is what the driver is for.
 * The caller's fallbacks apply instead: a page off the node (STRICT_NODE)
 * with ALLOW_UNPLACED pins again without the check; any refusal with
 * ALLOW_UNPINNED leaves the buffer unpinned.
 */
static int pin_driver(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		      struct haccel_hostmem *m)
{
	int node = pl->bound ? pl->p.node : HACCEL_NODE_ANY;
	bool strict = node >= 0 && haccel__driver_strict_node(ctx);
	char why[1024];
	int ret;

	ret = haccel__driver_pin(ctx, m->ptr, m->mapped_bytes, node, strict, &m->pins, why,
				 sizeof(why));
	if (ret == -EXDEV) {
		if (!(pl->p.flags & HACCEL_HOSTMEM_ALLOW_UNPLACED))
			/* -ENOMEM, as for a page the sampled check finds elsewhere. */
			return haccel__fail(ctx, -ENOMEM,
					    "hostmem: %s: the binding did not hold (cpuset change?); pass HACCEL_HOSTMEM_ALLOW_UNPLACED to accept it",
					    why);
		haccel__warn(ctx, "hostmem: %s; continuing unplaced (HACCEL_HOSTMEM_ALLOW_UNPLACED)", why);
		pl->fell_unplaced = true;
		pl->bound = false;
		ret = haccel__driver_pin(ctx, m->ptr, m->mapped_bytes, HACCEL_NODE_ANY, false,
					 &m->pins, why, sizeof(why));
	}
	if (ret == 0) {
		m->pinned = 1;
		m->provider = HACCEL_HOSTMEM_PROVIDER_DRIVER;
		return 0;
	}
	if (pl->p.flags & HACCEL_HOSTMEM_ALLOW_UNPINNED) {
		haccel__warn(ctx, "hostmem: %s; continuing unpinned (HACCEL_HOSTMEM_ALLOW_UNPINNED)", why);
		pl->fell_unpinned = true;
		return 0;
	}
	return haccel__fail(ctx, ret, "hostmem: %s", why);
}

static int lock(struct haccel_ctx *ctx, struct hostmem_plan *pl,
		struct haccel_hostmem *m)
{
	char why[768];
	int e, status;

	status = haccel__driver_provider(ctx, why, sizeof(why));
	if (status < 0)
		return haccel__fail(ctx, status, "hostmem: %s", why);
	if (status == HACCEL_HOSTMEM_PROVIDER_DRIVER)
		return pin_driver(ctx, pl, m);
	if (sys_mlock(m->ptr, (size_t)m->mapped_bytes) == 0) {
		m->pinned = 1;
		m->provider = HACCEL_HOSTMEM_PROVIDER_USER;
		return 0;
	}
	e = errno;
	status = lock_refusal(ctx, m, e, why, sizeof(why));
	if (pl->p.flags & HACCEL_HOSTMEM_ALLOW_UNPINNED) {
		/* EAGAIN can leave part of the range locked: all or nothing. */
		(void)sys_munlock(m->ptr, (size_t)m->mapped_bytes);
		haccel__warn(ctx, "hostmem: %s; continuing unpinned (HACCEL_HOSTMEM_ALLOW_UNPINNED)", why);
		pl->fell_unpinned = true;
		return 0;
	}
	return haccel__fail(ctx, status, "hostmem: %s", why);
}

/* --- counters ------------------------------------------------------------ */

/*
 * The counter a buffer's bytes go to: one per node it is bound to; the
 * unplaced bucket for HACCEL_NODE_ANY, an unplaced fallback, or a node id
 * past HACCEL_MAX_NODES; bytes_unpinned whatever the node when not locked.
 * Computed from fields fixed at alloc, so free subtracts what alloc added.
 */
static uint64_t *stats_bucket(struct haccel_hostmem_stats *s,
			      const struct haccel_hostmem *m)
{
	if (!m->pinned)
		return &s->bytes_unpinned;
	if (m->node >= 0 && m->node < HACCEL_MAX_NODES)
		return &s->bytes_pinned[m->node];
	return &s->bytes_pinned_unplaced;
}

static void stats_add(struct haccel_ctx *ctx, const struct haccel_hostmem *m,
		      const struct hostmem_plan *pl)
{
	struct haccel_hostmem_stats *s = ctx->hostmem_stats;
	struct haccel__provider_counts *c = haccel__driver_counts(ctx);

	pthread_mutex_lock(&ctx->lock);
	*stats_bucket(s, m) += m->mapped_bytes;
	s->buffers++;
	c->bytes[m->provider] += m->mapped_bytes;
	c->buffers[m->provider]++;
	s->fallbacks_unpinned += pl->fell_unpinned;
	s->fallbacks_unplaced += pl->fell_unplaced;
	pthread_mutex_unlock(&ctx->lock);
}

static void stats_sub(struct haccel_ctx *ctx, const struct haccel_hostmem *m)
{
	struct haccel_hostmem_stats *s = ctx->hostmem_stats;
	struct haccel__provider_counts *c = haccel__driver_counts(ctx);

	pthread_mutex_lock(&ctx->lock);
	*stats_bucket(s, m) -= m->mapped_bytes;
	s->buffers--;
	c->bytes[m->provider] -= m->mapped_bytes;
	c->buffers[m->provider]--;
	pthread_mutex_unlock(&ctx->lock);
}

/* --- public -------------------------------------------------------------- */

int haccel_hostmem_alloc(struct haccel_ctx *ctx,
			 const struct haccel_hostmem_params *params,
			 struct haccel_hostmem **out)
{
	struct hostmem_plan pl;
	struct haccel_hostmem *m;
	int ret;

	if (!ctx)
		return -EINVAL;
	if (!params || !out)
		return haccel__fail(ctx, -EINVAL, "hostmem: NULL %s", params ? "out" : "params");
	*out = NULL;
	memset(&pl, 0, sizeof(pl));
	haccel_hostmem_params_init(&pl.p);
	if (haccel__config_copy(&pl.p, sizeof(pl.p), params, HOSTMEM_PARAMS_MIN_SIZE))
		return haccel__fail(ctx, -EINVAL,
				    "hostmem: params size %u is not one this library knows (%zu..%zu, larger only with zeroed tail)",
				    params->size, HOSTMEM_PARAMS_MIN_SIZE, sizeof(pl.p));
	ret = check_params(ctx, &pl);
	if (ret)
		return ret;

	m = calloc(1, sizeof(*m));
	if (!m)
		return haccel__fail(ctx, -ENOMEM, "hostmem: out of memory for the buffer's handle");
	m->ctx = ctx;
	m->bytes = pl.p.bytes;
	ret = map_memory(ctx, &pl, m);
	if (ret)
		goto err_free;
	ret = place(ctx, &pl, m);
	if (ret)
		goto err_unmap;
	ret = populate(ctx, &pl, m);
	if (ret)
		goto err_unmap;
	ret = verify(ctx, &pl, m);
	if (ret)
		goto err_unmap;
	ret = lock(ctx, &pl, m);
	if (ret)
		goto err_unmap;

	m->node = pl.bound ? pl.p.node : -1;
	stats_add(ctx, m, &pl);
	haccel__dbg(ctx, "hostmem: %llu bytes (%llu mapped, %llu-byte pages) at %p, node %d, %s",
		    (unsigned long long)m->bytes, (unsigned long long)m->mapped_bytes,
		    (unsigned long long)m->page_size, m->ptr, m->node,
		    m->provider == HACCEL_HOSTMEM_PROVIDER_DRIVER ? "pinned by haccel.ko" :
		    m->pinned ? "locked" : "unpinned");
	*out = m;
	return 0;

err_unmap:
	munmap(m->ptr, (size_t)m->mapped_bytes);
err_free:
	free(m);
	return ret;
}

void haccel_hostmem_free(struct haccel_hostmem *m)
{
	if (!m)
		return;
	/* Closing the handles unpins; munmap unlocks an mlock'ed buffer. */
	haccel__driver_unpin(m->ctx, &m->pins);
	if (munmap(m->ptr, (size_t)m->mapped_bytes))
		haccel__err(m->ctx, "hostmem: munmap of %llu bytes at %p failed: %s",
			    (unsigned long long)m->mapped_bytes, m->ptr, strerror(errno));
	stats_sub(m->ctx, m);
	free(m);
}

int haccel_hostmem_info(const struct haccel_hostmem *m,
			struct haccel_hostmem_info *out)
{
	if (!m || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->ptr = m->ptr;
	out->bytes = m->bytes;
	out->mapped_bytes = m->mapped_bytes;
	out->page_size = m->page_size;
	out->node = m->node;
	out->pinned = m->pinned;
	out->huge = m->huge;
	return 0;
}

int haccel_hostmem_provider(const struct haccel_hostmem *m)
{
	return m ? (int)m->provider : -EINVAL;
}
