// SPDX-License-Identifier: MIT
/* 100,000 random-argument calls over every haccel ioctl, half of them by an unprivileged process at the same time: only documented errors, within a time limit, and exact statistics for the buffers left open at the end. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver-util.h"

#define CALLS 100000		/* in all, half by each process */
#define TIME_LIMIT 150		/* seconds for the calls; over it the case fails */
#define REGION_PAGES 64
#define LIVE 64			/* objects a process tracks */
#define KEEP_AT_END 8		/* objects each process holds for the final check */
#define NOPS 10

enum { OP_PARAM, OP_PIN, OP_BO_INFO, OP_STATS, OP_QUOTA_GET, OP_QUOTA_SET,
       OP_GEM_CLOSE, OP_EXPORT, OP_IMPORT, OP_DMABUF_CLOSE };
static const char *const op_names[NOPS] = {
	"GET_PARAM", "PIN", "BO_INFO", "STATS", "QUOTA_GET", "QUOTA_SET",
	"GEM_CLOSE", "PRIME_EXPORT", "PRIME_IMPORT", "DMABUF_CLOSE",
};

enum { RES_OK, RES_EINVAL, RES_EFAULT, RES_ENOENT, RES_EDQUOT, RES_EXDEV, RES_E2BIG, RES_EPERM,
       RES_EOPNOTSUPP, RES_EBADF, RES_EBUSY, RES_OTHER, NRES };

/* A buffer this process keeps alive: through its handle, a dma-buf fd or both. */
struct obj {
	uint32_t handle;	/* 0: closed */
	int dmabuf;		/* -1: none */
	uint64_t node_bytes[HD_MAX_NODES];
};

/* One fuzzing process: its file, its memory, what it holds, what it saw. */
struct fz {
	int fd, unprivileged;
	uint64_t rng;
	size_t pg;
	unsigned int nnodes;
	char *region, *ro_region, *hole, *file_region;
	struct obj obj[LIVE];
	unsigned int nobj;
	unsigned long counts[NOPS][NRES], odd, calls;
};

static uint64_t rnd(struct fz *z, uint64_t n)
{
	return hd_rng(&z->rng) % n;
}

static uint64_t rnd64(struct fz *z)
{
	return hd_rng(&z->rng);
}

/* Mostly small, sometimes anything. */
static uint32_t rand_flags(struct fz *z)
{
	switch (rnd(z, 8)) {
	case 0:
		return (uint32_t)rnd64(z);
	case 1:
		return 1u << rnd(z, 32);
	default:
		return rnd(z, 4) ? 0 : 1;
	}
}

static uint64_t rand_addr(struct fz *z)
{
	switch (rnd(z, 11)) {
	case 0:
		return 0;
	case 1:
		return rnd64(z);
	case 2:
		return 0xffff800000000000ull + rnd(z, 1u << 20) * z->pg;
	case 3:
		return (uintptr_t)z->ro_region + rnd(z, 4) * z->pg;
	case 4:
		return (uintptr_t)z->hole + rnd(z, 4) * z->pg;
	case 5:
		return (uintptr_t)z->region + rnd(z, REGION_PAGES * z->pg); /* unaligned */
	case 6:
		if (z->file_region)
			return (uintptr_t)z->file_region + rnd(z, 4) * z->pg;
		/* fall through */
	default:
		return (uintptr_t)z->region + rnd(z, REGION_PAGES) * z->pg;
	}
}

static uint64_t rand_size(struct fz *z)
{
	switch (rnd(z, 8)) {
	case 0:
		return 0;
	case 1:
		return rnd64(z);
	case 2:
		return rnd(z, 1u << 16);
	case 3:
		return (1 + rnd(z, 1u << 20)) * z->pg;
	default:
		return (1 + rnd(z, 8)) * z->pg;
	}
}

static uint32_t rand_node(struct fz *z)
{
	switch (rnd(z, 6)) {
	case 0:
		return (uint32_t)rnd64(z);
	case 1:
		return HACCEL_DRM_NODE_ANY;
	default:
		return (uint32_t)rnd(z, 3);
	}
}

static struct obj *find_handle(struct fz *z, uint32_t h)
{
	for (unsigned int i = 0; i < z->nobj; i++)
		if (h && z->obj[i].handle == h)
			return &z->obj[i];
	return NULL;
}

static struct obj *rand_obj(struct fz *z)
{
	return z->nobj ? &z->obj[rnd(z, z->nobj)] : NULL;
}

static uint32_t rand_handle(struct fz *z)
{
	struct obj *o = rand_obj(z);

	if (o && o->handle && rnd(z, 4))
		return o->handle;
	return rnd(z, 4) ? (uint32_t)rnd(z, 200) : (uint32_t)rnd64(z);
}

static uint64_t rand_uptr(struct fz *z, void *good)
{
	switch (rnd(z, 6)) {
	case 0:
		return 0;
	case 1:
		return rnd(z, 4096);
	case 2:
		return 0xffff800000000000ull;
	case 3:
		return (uintptr_t)z->ro_region;
	default:
		return (uintptr_t)good;
	}
}

/* Drop an object neither a handle nor a dma-buf keeps any more. */
static void obj_drop_if_dead(struct fz *z, struct obj *o)
{
	if (o->handle || o->dmabuf >= 0)
		return;
	*o = z->obj[--z->nobj];
}

/* A new buffer: record where its pages are (or close it when the table is full). */
static void obj_add(struct fz *z, uint32_t h)
{
	struct drm_haccel_bo_info bi;
	struct obj *o;

	if (z->nobj == LIVE) {
		KTAP_EXPECT_EQ(hd_close_handle(z->fd, h), 0);
		return;
	}
	o = &z->obj[z->nobj++];
	memset(o, 0, sizeof(*o));
	o->handle = h;
	o->dmabuf = -1;
	KTAP_EXPECT_EQ(hd_bo_info(z->fd, h, &bi, o->node_bytes, HD_MAX_NODES), 0);
	for (unsigned int n = 0; n < HD_MAX_NODES; n++)
		o->node_bytes[n] *= z->pg;
}

static int res_of(int r)
{
	switch (r) {
	case 0: return RES_OK;
	case -EINVAL: return RES_EINVAL;
	case -EFAULT: return RES_EFAULT;
	case -ENOENT: return RES_ENOENT;
	case -EDQUOT: return RES_EDQUOT;
	case -EXDEV: return RES_EXDEV;
	case -E2BIG: return RES_E2BIG;
	case -EPERM: return RES_EPERM;
	case -EOPNOTSUPP: return RES_EOPNOTSUPP;
	case -EBADF: return RES_EBADF;
	case -EBUSY: return RES_EBUSY;
	default: return RES_OTHER;
	}
}

/* The results an operation may have; anything else is a failure. */
static int allowed(struct fz *z, unsigned int op, int res, int valid_quota_set)
{
	uint32_t ok = 1u << RES_OK | 1u << RES_EINVAL | 1u << RES_E2BIG;

	switch (op) {
	case OP_PIN:
		ok |= 1u << RES_EFAULT | 1u << RES_EDQUOT | 1u << RES_EXDEV | 1u << RES_EOPNOTSUPP;
		break;
	case OP_BO_INFO:
		ok |= 1u << RES_EFAULT | 1u << RES_ENOENT;
		break;
	case OP_STATS:
		ok |= 1u << RES_EFAULT;
		break;
	case OP_QUOTA_SET:
		/* Validated first, then the capability: nobody's valid calls are EPERM. */
		if (z->unprivileged)
			ok = valid_quota_set ? 1u << RES_EPERM : 1u << RES_EINVAL | 1u << RES_E2BIG;
		break;
	case OP_GEM_CLOSE:
		ok = 1u << RES_OK | 1u << RES_EINVAL;
		break;
	case OP_EXPORT:
		/* EBUSY: exported before in the other mode (read-only or not). */
		ok = 1u << RES_OK | 1u << RES_ENOENT | 1u << RES_EINVAL | 1u << RES_EBUSY;
		break;
	case OP_IMPORT:
		ok = 1u << RES_OK | 1u << RES_EBADF | 1u << RES_EINVAL;
		break;
	case OP_DMABUF_CLOSE:
		ok = 1u << RES_OK;
		break;
	}
	return (ok >> res) & 1;
}

/* One random call: returns its result, in *op what it was. */
static int one_call(struct fz *z, unsigned int *op, int *valid_quota_set)
{
	unsigned char buf[128];
	uint64_t arrays[2][HD_MAX_NODES];
	unsigned int nr = (unsigned int)rnd(z, NOPS), dir = _IOC_READ | _IOC_WRITE;
	unsigned int size = 0, ksize;
	int r;

	memset(buf, 0, sizeof(buf));
	*op = nr;
	*valid_quota_set = 0;
	switch (nr) {
	case OP_PARAM: {
		struct drm_haccel_param *p = (void *)buf;

		p->param = rnd(z, 4) ? (uint32_t)rnd(z, 8) : (uint32_t)rnd64(z);
		p->flags = rand_flags(z) * !rnd(z, 2);
		size = sizeof(*p);
		break;
	}
	case OP_PIN: {
		struct drm_haccel_pin *p = (void *)buf;

		p->addr = rand_addr(z);
		p->size = rand_size(z);
		/* Keep most attempts inside the region, so many succeed. */
		if (p->addr >= (uintptr_t)z->region &&
		    p->addr < (uintptr_t)z->region + REGION_PAGES * z->pg && rnd(z, 4)) {
			uint64_t left = (uintptr_t)z->region + REGION_PAGES * z->pg - p->addr;

			if (p->size > left)
				p->size = left;
		}
		p->node = rand_node(z);
		p->flags = rand_flags(z) * !rnd(z, 2);
		p->pad = rnd(z, 16) ? 0 : (uint32_t)rnd64(z);
		p->handle = (uint32_t)rnd64(z);
		size = sizeof(*p);
		break;
	}
	case OP_BO_INFO: {
		struct drm_haccel_bo_info *p = (void *)buf;

		p->handle = rand_handle(z);
		p->flags = rand_flags(z) * !rnd(z, 2);
		p->node_pages = rand_uptr(z, arrays[0]);
		p->num_nodes = rnd(z, 3) ? (uint32_t)rnd(z, HD_MAX_NODES) : (uint32_t)rnd64(z);
		if (p->node_pages == (uintptr_t)arrays[0] && p->num_nodes > HD_MAX_NODES)
			p->num_nodes = HD_MAX_NODES;
		p->pad = rnd(z, 16) ? 0 : 1;
		size = sizeof(*p);
		break;
	}
	case OP_STATS: {
		struct drm_haccel_stats *p = (void *)buf;

		p->node_bytes = rand_uptr(z, arrays[0]);
		p->client_bytes = rand_uptr(z, arrays[1]);
		p->num_nodes = (uint32_t)rnd(z, HD_MAX_NODES + 1);
		p->flags = rand_flags(z) * !rnd(z, 2);
		size = sizeof(*p);
		break;
	}
	case OP_QUOTA_GET:
	case OP_QUOTA_SET: {
		struct drm_haccel_quota *p = (void *)buf;

		p->node = rand_node(z);
		p->flags = rand_flags(z) * !rnd(z, 2);
		/*
		 * Limits stay large enough that the run keeps pinning and
		 * small enough that no random size gets past the quota to
		 * allocate a page array the guest cannot hold.
		 */
		p->node_limit = (64 + rnd(z, 4096)) * z->pg;
		p->client_limit = (64 + rnd(z, 4096)) * z->pg;
		if (nr == OP_QUOTA_SET) {
			dir = _IOC_WRITE;
			*valid_quota_set = !p->flags && (p->node == HACCEL_DRM_NODE_ANY ||
							 p->node < z->nnodes);
		}
		size = sizeof(*p);
		break;
	}
	case OP_GEM_CLOSE: {
		struct drm_gem_close c = { .handle = rand_handle(z) };

		r = hd_ioctl(z->fd, DRM_IOCTL_GEM_CLOSE, &c);
		if (r == 0) {
			struct obj *o = find_handle(z, c.handle);

			KTAP_EXPECT(o != NULL);
			if (o) {
				o->handle = 0;
				obj_drop_if_dead(z, o);
			}
		}
		return r;
	}
	case OP_EXPORT: {
		uint32_t h = rand_handle(z);
		struct obj *o = find_handle(z, h);

		r = hd_export(z->fd, h, (int)rnd(z, 2));
		if (r < 0)
			return r;
		KTAP_EXPECT(o != NULL);
		/* Keep the first fd of a buffer now and then, else release it. */
		if (o && o->dmabuf < 0 && rnd(z, 2))
			o->dmabuf = r;
		else
			close(r);
		return 0;
	}
	case OP_IMPORT: {
		struct obj *o = rand_obj(z);
		uint32_t h;

		if (!o || o->dmabuf < 0 || !rnd(z, 8))
			return hd_import(z->fd, rnd(z, 2) ? -1 : 1000 + (int)rnd(z, 24), &h);
		r = hd_import(z->fd, o->dmabuf, &h);
		if (r)
			return r;
		/* In its own file a buffer has one handle: the same, or a new one once closed. */
		if (o->handle)
			KTAP_EXPECT_EQ(h, o->handle);
		else
			o->handle = h;
		return 0;
	}
	case OP_DMABUF_CLOSE: {
		struct obj *o = rand_obj(z);

		if (o && o->dmabuf >= 0) {
			close(o->dmabuf);
			o->dmabuf = -1;
			obj_drop_if_dead(z, o);
		}
		return 0;
	}
	}
	/*
	 * Now and then a struct of the wrong size or direction, and a long
	 * struct's tail random half the time (else zero).
	 */
	ksize = size;
	if (!rnd(z, 8))
		size = (unsigned int)rnd(z, sizeof(buf) + 1);
	if (size > ksize && rnd(z, 2))
		for (unsigned int i = ksize; i < size; i++)
			buf[i] = (unsigned char)rnd64(z);
	if (!rnd(z, 32))
		dir = (unsigned int)rnd(z, 4);
	/* A QUOTA_SET that passes every check but the capability's. */
	if (*valid_quota_set) {
		*valid_quota_set = size >= ksize && dir == _IOC_WRITE;
		for (unsigned int i = ksize; i < size && *valid_quota_set; i++)
			*valid_quota_set = !buf[i];
	}
	r = hd_ioctl(z->fd, hd_cmd(nr, dir, size), buf);
	if (r == 0 && nr == OP_PIN) {
		struct drm_haccel_pin *p = (void *)buf;

		obj_add(z, p->handle);
	}
	if (r == 0 && nr == OP_QUOTA_SET && z->unprivileged)
		KTAP_EXPECT(!"an unprivileged QUOTA_SET succeeded");
	return r;
}

static void fz_init(struct fz *z, int fd, uint64_t seed, int unprivileged)
{
	const char *scratch = getenv("HACCEL_VM_SCRATCH");

	memset(z, 0, sizeof(*z));
	z->fd = fd;
	z->rng = seed | 1;
	z->unprivileged = unprivileged;
	z->pg = hd_page();
	z->nnodes = hd_online_nodes();
	z->region = hd_alloc(REGION_PAGES * z->pg, -1);
	z->ro_region = hd_alloc(4 * z->pg, -1);
	KTAP_ASSERT_EQ(mprotect(z->ro_region, 4 * z->pg, PROT_READ), 0);
	z->hole = hd_alloc(4 * z->pg, -1);
	KTAP_ASSERT_EQ(munmap(z->hole, 4 * z->pg), 0);
	/* Page cache of a disk file system: PIN refuses it (-EOPNOTSUPP). */
	if (scratch) {
		char path[256];
		int file;

		snprintf(path, sizeof(path), "%s/fuzz-XXXXXX", scratch);
		file = mkstemp(path);
		KTAP_ASSERT(file >= 0);
		unlink(path);
		KTAP_ASSERT_EQ(ftruncate(file, (off_t)(4 * z->pg)), 0);
		z->file_region = mmap(NULL, 4 * z->pg, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
		KTAP_ASSERT(z->file_region != MAP_FAILED);
		close(file);
	}
}

/* The calls; 0 when they all finished within the time limit. */
static int fz_run(struct fz *z, unsigned long calls, time_t deadline)
{
	while (z->calls < calls) {
		unsigned int op;
		int valid_quota_set, r, res;

		if ((z->calls & 1023) == 0 && time(NULL) > deadline)
			return -1;
		r = one_call(z, &op, &valid_quota_set);
		res = res_of(r);
		z->counts[op][res]++;
		if (!allowed(z, op, res, valid_quota_set) && z->odd++ < 10)
			ktap_diag("%s%s returned %d", z->unprivileged ? "unprivileged " : "",
				  op_names[op], r);
		z->calls++;
	}
	return 0;
}

static void fz_report(const struct fz *z, const char *who)
{
	for (int i = 0; i < NOPS; i++)
		ktap_diag("%s %-12s ok %lu einval %lu efault %lu enoent %lu edquot %lu exdev %lu "
			  "e2big %lu eperm %lu eopnotsupp %lu ebadf %lu ebusy %lu other %lu", who,
			  op_names[i],
			  z->counts[i][RES_OK], z->counts[i][RES_EINVAL], z->counts[i][RES_EFAULT],
			  z->counts[i][RES_ENOENT], z->counts[i][RES_EDQUOT], z->counts[i][RES_EXDEV],
			  z->counts[i][RES_E2BIG], z->counts[i][RES_EPERM], z->counts[i][RES_EOPNOTSUPP],
			  z->counts[i][RES_EBADF], z->counts[i][RES_EBUSY], z->counts[i][RES_OTHER]);
}

/*
 * Hold at least KEEP_AT_END buffers for the final check, one of them only
 * through a dma-buf (its handle closed), pinned from the region's pages
 * on whatever nodes they are.
 */
static void fz_top_up(struct fz *z)
{
	for (unsigned int i = 0; z->nobj < KEEP_AT_END; i++) {
		uint32_t h;

		KTAP_ASSERT_EQ(hd_pin(z->fd, z->region + (i % REGION_PAGES) * z->pg,
				      (1 + i % 3) * z->pg, HACCEL_DRM_NODE_ANY, 0, &h), 0);
		obj_add(z, h);
	}
	for (unsigned int i = 0; i < z->nobj; i++)
		if (!z->obj[i].handle)
			return;
	{
		struct obj *o = &z->obj[0];

		/* In whichever mode its dma-buf already has. */
		if (o->dmabuf < 0)
			o->dmabuf = hd_export(z->fd, o->handle, 0);
		if (o->dmabuf == -EBUSY)
			o->dmabuf = hd_export(z->fd, o->handle, 1);
		KTAP_ASSERT(o->dmabuf >= 0);
		KTAP_ASSERT_EQ(hd_close_handle(z->fd, o->handle), 0);
		o->handle = 0;
	}
}

/* What this process holds, per node and in all, checked against its client stats. */
struct held {
	uint64_t node[HD_MAX_NODES];
	uint64_t bos, pages;
	int ok;
};

static struct held fz_check_client(struct fz *z)
{
	struct held h;
	struct hd_stats st;
	unsigned int before = ktap_failures();
	uint64_t total = 0;

	memset(&h, 0, sizeof(h));
	for (unsigned int i = 0; i < z->nobj; i++) {
		for (unsigned int n = 0; n < HD_MAX_NODES; n++)
			h.node[n] += z->obj[i].node_bytes[n];
		h.bos++;
	}
	hd_stats(z->fd, &st);
	for (unsigned int n = 0; n < HD_MAX_NODES; n++) {
		KTAP_EXPECT_EQ(st.client[n], h.node[n]);
		total += h.node[n];
	}
	KTAP_EXPECT_EQ(st.s.client_total, total);
	KTAP_EXPECT_EQ(st.s.client_bos, h.bos);
	h.pages = total / z->pg;
	h.ok = ktap_failures() == before;
	return h;
}

static void fz_release(struct fz *z)
{
	struct hd_stats st;

	for (unsigned int i = 0; i < z->nobj; i++) {
		if (z->obj[i].handle)
			KTAP_EXPECT_EQ(hd_close_handle(z->fd, z->obj[i].handle), 0);
		if (z->obj[i].dmabuf >= 0)
			close(z->obj[i].dmabuf);
	}
	z->nobj = 0;
	hd_stats(z->fd, &st);
	KTAP_EXPECT_EQ(st.s.client_total, 0);
	KTAP_EXPECT_EQ(st.s.client_bos, 0);
}

static void wait_byte(int fd, char want)
{
	char c = 0;

	KTAP_ASSERT_EQ(read(fd, &c, 1), 1);
	KTAP_ASSERT_EQ(c, want);
}

static void put_byte(int fd, char c)
{
	KTAP_ASSERT_EQ(write(fd, &c, 1), 1);
}

/*
 * The unprivileged half: its own file (opened as root: the node is root's
 * alone in the VM), then uid 65534 for good, then its calls.
 */
static void child(uint64_t seed, time_t deadline, int c2p, int p2c)
{
	static struct fz z;
	struct held h;
	int fd = hd_open(), late;

	fz_init(&z, fd, seed, 1);
	KTAP_ASSERT_EQ(hd_drop_to_nobody(), 0);
	late = fz_run(&z, CALLS / 2, deadline);
	if (late)
		ktap_fail_at(__FILE__, __LINE__, "unprivileged: %lu calls in %d s, not %d",
			     z.calls, TIME_LIMIT, CALLS / 2);
	fz_report(&z, "nobody");
	KTAP_EXPECT_EQ(z.odd, 0);
	KTAP_EXPECT(z.counts[OP_QUOTA_SET][RES_EPERM] > 0);
	KTAP_EXPECT(z.counts[OP_PIN][RES_OK] > 0);
	put_byte(c2p, 'c');
	wait_byte(p2c, 'q');
	fz_top_up(&z);
	h = fz_check_client(&z);
	h.ok &= ktap_failures() == 0;
	KTAP_ASSERT_EQ(write(c2p, &h, sizeof(h)), (ssize_t)sizeof(h));
	wait_byte(p2c, 'e');
	fz_release(&z);
	ktap_end();
}

static void random_ioctls(void)
{
	static struct fz z;
	int fd = hd_open(), c2p[2], p2c[2], status, late;
	uint64_t seeds[2] = { ktap_rand(), ktap_rand() };
	time_t start = time(NULL), deadline = start + TIME_LIMIT;
	long long pins0 = hd_foll_pins();
	struct hd_quotas saved;
	struct hd_stats st;
	struct held mine, theirs;
	pid_t pid;

	hd_need_root();
	hd_quotas_save(fd, &saved);
	hd_stats(fd, &st);
	KTAP_ASSERT_EQ(st.s.node_total, 0);
	KTAP_ASSERT_EQ(pipe(c2p), 0);
	KTAP_ASSERT_EQ(pipe(p2c), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		close(c2p[0]);
		close(p2c[1]);
		child(seeds[1], deadline, c2p[1], p2c[0]);
	}
	close(c2p[1]);
	close(p2c[0]);

	fz_init(&z, fd, seeds[0], 0);
	late = fz_run(&z, CALLS / 2, deadline);
	if (late)
		ktap_fail_at(__FILE__, __LINE__, "%lu calls in %d s, not %d", z.calls, TIME_LIMIT,
			     CALLS / 2);
	fz_report(&z, "root");
	KTAP_EXPECT_EQ(z.odd, 0);
	KTAP_EXPECT(z.counts[OP_PIN][RES_OK] > 0);
	KTAP_EXPECT(z.counts[OP_PIN][RES_E2BIG] > 0);
	KTAP_EXPECT(z.counts[OP_QUOTA_SET][RES_OK] > 0);
	if (z.file_region)
		KTAP_EXPECT(z.counts[OP_PIN][RES_EOPNOTSUPP] > 0);

	/* Both done: the limits back, then each tops up and checks its own file. */
	wait_byte(c2p[0], 'c');
	ktap_diag("%lu + %d calls in %ld s (seed %llu)", z.calls, CALLS / 2,
		  (long)(time(NULL) - start), (unsigned long long)ktap_seed());
	hd_quotas_restore(fd, &saved);
	put_byte(p2c[1], 'q');
	fz_top_up(&z);
	mine = fz_check_client(&z);
	KTAP_ASSERT_EQ(read(c2p[0], &theirs, sizeof(theirs)), (ssize_t)sizeof(theirs));
	KTAP_EXPECT(theirs.ok);

	/* Node-wide: exactly the two processes' buffers, pages and all. */
	hd_stats(fd, &st);
	{
		uint64_t total = 0;

		for (unsigned int n = 0; n < HD_MAX_NODES; n++) {
			KTAP_EXPECT_EQ(st.node[n], mine.node[n] + theirs.node[n]);
			total += mine.node[n] + theirs.node[n];
		}
		KTAP_EXPECT_EQ(st.s.node_total, total);
		KTAP_EXPECT(total > 0);
	}
	KTAP_EXPECT_EQ(st.s.node_bos, mine.bos + theirs.bos);
	KTAP_EXPECT(mine.bos >= KEEP_AT_END && theirs.bos >= KEEP_AT_END);
	if (pins0 >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins0 + (long long)(mine.pages + theirs.pages));
	ktap_diag("held at the end: %llu + %llu buffers, %llu + %llu pages",
		  (unsigned long long)mine.bos, (unsigned long long)theirs.bos,
		  (unsigned long long)mine.pages, (unsigned long long)theirs.pages);

	put_byte(p2c[1], 'e');
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fz_release(&z);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.node_total, 0);
	KTAP_EXPECT_EQ(st.s.node_bos, 0);
	if (pins0 >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins0);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(random_ioctls, TIME_LIMIT + 90),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
