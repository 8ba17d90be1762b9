// SPDX-License-Identifier: MIT
/* A bounded random-argument run over every haccel ioctl (100,000 calls or 40 s): only documented errors, exact statistics after. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "driver-util.h"

#define CALLS 100000
#define SECONDS 40
#define REGION_PAGES 64
#define LIVE 64

static size_t pg;
static char *region, *ro_region, *hole;
static uint32_t live[LIVE];
static unsigned int nlive;
static unsigned long counts[8][8]; /* [ioctl][outcome] */

static uint64_t rnd(uint64_t n)
{
	return ktap_rand_below(n);
}

/* Mostly small, sometimes anything. */
static uint32_t rand_flags(void)
{
	switch (rnd(8)) {
	case 0:
		return (uint32_t)ktap_rand();
	case 1:
		return 1u << rnd(32);
	default:
		return rnd(4) ? 0 : 1;
	}
}

static uint64_t rand_addr(void)
{
	switch (rnd(10)) {
	case 0:
		return 0;
	case 1:
		return ktap_rand();
	case 2:
		return 0xffff800000000000ull + rnd(1u << 20) * pg;
	case 3:
		return (uintptr_t)ro_region + rnd(4) * pg;
	case 4:
		return (uintptr_t)hole + rnd(4) * pg;
	case 5:
		return (uintptr_t)region + rnd(REGION_PAGES * pg); /* unaligned */
	default:
		return (uintptr_t)region + rnd(REGION_PAGES) * pg;
	}
}

static uint64_t rand_size(void)
{
	switch (rnd(8)) {
	case 0:
		return 0;
	case 1:
		return ktap_rand();
	case 2:
		return rnd(1u << 16);
	case 3:
		return (1 + rnd(1u << 20)) * pg;
	default:
		return (1 + rnd(8)) * pg;
	}
}

static uint32_t rand_node(void)
{
	switch (rnd(6)) {
	case 0:
		return (uint32_t)ktap_rand();
	case 1:
		return HACCEL_NODE_ANY;
	default:
		return (uint32_t)rnd(3);
	}
}

static uint32_t rand_handle(void)
{
	if (nlive && rnd(4))
		return live[rnd(nlive)];
	return (uint32_t)rnd(4) ? (uint32_t)rnd(200) : (uint32_t)ktap_rand();
}

static uint64_t rand_uptr(void *good)
{
	switch (rnd(6)) {
	case 0:
		return 0;
	case 1:
		return rnd(4096);
	case 2:
		return 0xffff800000000000ull;
	case 3:
		return (uintptr_t)ro_region;
	default:
		return (uintptr_t)good;
	}
}

static void forget(uint32_t h)
{
	for (unsigned int i = 0; i < nlive; i++)
		if (live[i] == h) {
			live[i] = live[--nlive];
			return;
		}
}

/* One random call; returns 0 or -errno, records PIN handles. */
static int one_call(int fd, unsigned int *which)
{
	unsigned char buf[128];
	uint64_t arrays[2][HD_MAX_NODES];
	unsigned int nr = (unsigned int)rnd(8), dir = _IOC_READ | _IOC_WRITE;
	unsigned int size = 0;
	int r;

	memset(buf, 0, sizeof(buf));
	*which = nr;
	switch (nr) {
	case DRM_HACCEL_GET_PARAM: {
		struct drm_haccel_param *p = (void *)buf;

		p->param = rnd(4) ? (uint32_t)rnd(8) : (uint32_t)ktap_rand();
		p->flags = rand_flags() * !rnd(2);
		size = sizeof(*p);
		break;
	}
	case DRM_HACCEL_PIN: {
		struct drm_haccel_pin *p = (void *)buf;

		p->addr = rand_addr();
		p->size = rand_size();
		/* Keep most attempts inside the region, so many succeed. */
		if (p->addr >= (uintptr_t)region &&
		    p->addr < (uintptr_t)region + REGION_PAGES * pg && rnd(4)) {
			uint64_t left = (uintptr_t)region + REGION_PAGES * pg - p->addr;

			if (p->size > left)
				p->size = left;
		}
		p->node = rand_node();
		p->flags = rand_flags() * !rnd(2);
		p->pad = rnd(16) ? 0 : (uint32_t)ktap_rand();
		p->handle = (uint32_t)ktap_rand();
		size = sizeof(*p);
		break;
	}
	case DRM_HACCEL_BO_INFO: {
		struct drm_haccel_bo_info *p = (void *)buf;

		p->handle = rand_handle();
		p->flags = rand_flags() * !rnd(2);
		p->node_pages = rand_uptr(arrays[0]);
		p->num_nodes = rnd(3) ? (uint32_t)rnd(HD_MAX_NODES) : (uint32_t)ktap_rand();
		if (p->node_pages == (uintptr_t)arrays[0] && p->num_nodes > HD_MAX_NODES)
			p->num_nodes = HD_MAX_NODES;
		p->pad = rnd(16) ? 0 : 1;
		size = sizeof(*p);
		break;
	}
	case DRM_HACCEL_STATS: {
		struct drm_haccel_stats *p = (void *)buf;

		p->node_bytes = rand_uptr(arrays[0]);
		p->client_bytes = rand_uptr(arrays[1]);
		p->num_nodes = (uint32_t)rnd(HD_MAX_NODES + 1);
		p->flags = rand_flags() * !rnd(2);
		size = sizeof(*p);
		break;
	}
	case DRM_HACCEL_QUOTA_GET:
	case DRM_HACCEL_QUOTA_SET: {
		struct drm_haccel_quota *p = (void *)buf;

		p->node = rand_node();
		p->flags = rand_flags() * !rnd(2);
		/*
		 * Limits stay large enough that the run keeps pinning and
		 * small enough that no random size gets past the quota to
		 * allocate a page array the guest cannot hold.
		 */
		p->node_limit = (64 + rnd(4096)) * pg;
		p->client_limit = (64 + rnd(4096)) * pg;
		if (nr == DRM_HACCEL_QUOTA_SET)
			dir = _IOC_WRITE;
		size = sizeof(*p);
		break;
	}
	case 6: { /* GEM close */
		struct drm_gem_close c = { .handle = rand_handle() };

		r = hd_ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
		if (r == 0)
			forget(c.handle);
		return r;
	}
	default: { /* PRIME export and close */
		r = hd_export(fd, rand_handle(), (int)rnd(2));
		if (r >= 0) {
			close(r);
			r = 0;
		}
		return r;
	}
	}
	/* Now and then a struct of the wrong size or direction. */
	if (!rnd(16))
		size = (unsigned int)rnd(sizeof(buf) + 1);
	if (!rnd(32))
		dir = (unsigned int)rnd(4);
	r = hd_ioctl(fd, hd_cmd(nr, dir, size), buf);
	if (r == 0 && nr == DRM_HACCEL_PIN) {
		struct drm_haccel_pin *p = (void *)buf;

		if (nlive < LIVE)
			live[nlive++] = p->handle;
		else
			KTAP_EXPECT_EQ(hd_close_handle(fd, p->handle), 0);
	}
	return r;
}

static int outcome(int r)
{
	switch (r) {
	case 0: return 0;
	case -EINVAL: return 1;
	case -EFAULT: return 2;
	case -ENOENT: return 3;
	case -EDQUOT: return 4;
	case -EXDEV: return 5;
	case -E2BIG: return 6;
	default: return 7;
	}
}

static void random_ioctls(void)
{
	int fd = hd_open();
	struct hd_quotas saved;
	struct hd_stats st;
	time_t start = time(NULL);
	unsigned long calls = 0, odd = 0;
	static const char *const names[8] = { "GET_PARAM", "PIN", "BO_INFO", "STATS",
					      "QUOTA_GET", "QUOTA_SET", "GEM_CLOSE",
					      "PRIME_EXPORT" };

	pg = hd_page();
	hd_quotas_save(fd, &saved);
	region = hd_alloc(REGION_PAGES * pg, -1);
	ro_region = hd_alloc(4 * pg, -1);
	KTAP_ASSERT_EQ(mprotect(ro_region, 4 * pg, PROT_READ), 0);
	hole = hd_alloc(4 * pg, -1);
	KTAP_ASSERT_EQ(munmap(hole, 4 * pg), 0);

	while (calls < CALLS && time(NULL) - start < SECONDS) {
		unsigned int which;
		int r = one_call(fd, &which), o = outcome(r);

		counts[which][o]++;
		/* Only the documented errors; ENOMEM/EINTR never here. */
		if (o == 7 && !(which == 7 && (r == -ENOENT || r == -EINVAL))) {
			if (odd++ < 10)
				ktap_diag("%s returned %d", names[which], r);
		}
		calls++;
	}
	KTAP_EXPECT_EQ(odd, 0);
	ktap_diag("%lu calls in %ld s (seed %llu)", calls, (long)(time(NULL) - start),
		  (unsigned long long)ktap_seed());
	for (int i = 0; i < 8; i++)
		ktap_diag("%-12s ok %lu einval %lu efault %lu enoent %lu edquot %lu "
			  "exdev %lu e2big %lu other %lu", names[i], counts[i][0],
			  counts[i][1], counts[i][2], counts[i][3], counts[i][4],
			  counts[i][5], counts[i][6], counts[i][7]);
	KTAP_EXPECT(counts[DRM_HACCEL_PIN][0] > 0);

	hd_quotas_restore(fd, &saved);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.client_bos, nlive);
	for (unsigned int i = 0; i < nlive; i++)
		KTAP_EXPECT_EQ(hd_close_handle(fd, live[i]), 0);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.client_total, 0);
	KTAP_EXPECT_EQ(st.s.node_total, 0);
	KTAP_EXPECT_EQ(st.s.node_bos, 0);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(random_ioctls, SECONDS + 60),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
