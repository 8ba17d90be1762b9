// SPDX-License-Identifier: MIT
/* Four threads on four CPUs pinning on both nodes, closing, exporting and releasing dma-bufs while QUOTA_SET and a prober race them: node-wide, per-client and kernel pin counts exact, quotas never overrun. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver-util.h"

#define THREADS 4
#define ROUNDS 2000
#define KEEP 8		/* buffers a thread holds at most */
#define REGION 32	/* pages of memory per thread and node */
#define MAX_PAGES 4	/* pages per PIN */

/* A buffer a worker holds: through its handle, a dma-buf fd, or both. */
struct slot {
	uint32_t handle;	/* 0: closed */
	int dmabuf;		/* -1: none */
	uint64_t bytes;		/* 0: the slot is empty */
	unsigned int node;
};

struct worker {
	pthread_t tid;
	int fd;			/* shared or own file */
	char *mem[2];		/* REGION pages on node 0 and on node 1 */
	uint64_t seed;
	struct slot slot[KEEP];
	unsigned int pins, edquot, exports, errors;
};

enum mode { ONE_FILE, OWN_FILES, FIXED_QUOTA, RACING_QUOTA };

static size_t pg;
static unsigned int nnodes;	/* nodes the workers pin on: 1 or 2 */
static enum mode mode;
static atomic_int stop;
static uint64_t base[2], lo[2], hi[2];	/* usage before; quota values */

static int quota_races(void)
{
	return mode == FIXED_QUOTA || mode == RACING_QUOTA;
}

static void slot_release(struct worker *w, struct slot *s)
{
	if (s->handle && hd_close_handle(w->fd, s->handle))
		w->errors++;
	if (s->dmabuf >= 0 && close(s->dmabuf))
		w->errors++;
	memset(s, 0, sizeof(*s));
	s->dmabuf = -1;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int round = 0; round < ROUNDS; round++) {
		struct slot *s = &w->slot[hd_rng(&w->seed) % KEEP];
		uint64_t r = hd_rng(&w->seed);

		if (!s->bytes) {
			unsigned int node = (unsigned int)(r % nnodes);
			uint64_t npages = 1 + (r >> 8) % MAX_PAGES;
			uint64_t off = (r >> 16) % (REGION - npages + 1);
			uint32_t hint = (r >> 24) % 3 ? node : HACCEL_DRM_NODE_ANY;
			uint32_t flags = hint != HACCEL_DRM_NODE_ANY && (r >> 32) % 2 ?
					 HACCEL_PIN_STRICT_NODE : 0;
			int ret = hd_pin(w->fd, w->mem[node] + off * pg, npages * pg, hint,
					 flags, &s->handle);

			if (ret == 0) {
				s->bytes = npages * pg;
				s->node = node;
				w->pins++;
			} else if (ret == -EDQUOT && quota_races()) {
				w->edquot++;
			} else {
				w->errors++;
			}
			continue;
		}
		switch (r % 4) {
		case 0: /* export, keeping the fd */
			if (s->handle && s->dmabuf < 0) {
				s->dmabuf = hd_export(w->fd, s->handle, (int)(r >> 8) % 2);
				/*
				 * EBUSY: the buffer's dma-buf, made by an earlier
				 * export (this slot's or the prober's), has the
				 * other mode.
				 */
				if (s->dmabuf >= 0)
					w->exports++;
				else if (s->dmabuf != -EBUSY)
					w->errors++;
				break;
			}
			/* fall through */
		case 1: /* close the handle: an exported buffer lives on */
			if (s->handle) {
				if (hd_close_handle(w->fd, s->handle))
					w->errors++;
				s->handle = 0;
				if (s->dmabuf < 0)
					slot_release(w, s);
				break;
			}
			/* fall through */
		case 2: /* release the dma-buf */
			if (s->dmabuf >= 0) {
				if (close(s->dmabuf))
					w->errors++;
				s->dmabuf = -1;
				if (!s->handle)
					slot_release(w, s);
				break;
			}
			/* fall through */
		default:
			slot_release(w, s);
		}
	}
	return NULL;
}

/*
 * On the first worker's file: export and release whatever handle numbers
 * there may be, and ask for their info, racing the owners' PIN and
 * GEM_CLOSE. What it exports it releases at once, so the end state does
 * not depend on it.
 */
static void *probe(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = w->seed ^ 0x9e3779b97f4a7c15ull;
	unsigned long *hits = calloc(1, sizeof(*hits));

	while (!atomic_load(&stop)) {
		uint32_t h = 1 + (uint32_t)(hd_rng(&seed) % (2 * KEEP * THREADS));
		struct drm_haccel_bo_info bi;
		int dmabuf = hd_export(w->fd, h, 0);

		if (dmabuf >= 0) {
			(*hits)++;
			close(dmabuf);
		}
		hd_bo_info(w->fd, h, &bi, NULL, 0);
	}
	return hits;
}

/* Flip both nodes' limits between lo and hi (node-wide and per client). */
static void *quota_setter(void *arg)
{
	int fd = *(int *)arg;
	unsigned long *sets = calloc(1, sizeof(*sets));
	int low = 1;

	while (!atomic_load(&stop)) {
		for (unsigned int n = 0; n < nnodes; n++)
			if (hd_quota_set(fd, n, low ? lo[n] : hi[n],
					 low ? lo[n] - base[n] : hi[n]) == 0)
				(*sets)++;
		low = !low;
		usleep(200);
	}
	return sets;
}

/*
 * Samples the node-wide usage all along: it never exceeds the limit (the
 * highest one set, while QUOTA_SET races). Returns the count of samples
 * over it.
 */
static void *sample(void *arg)
{
	int fd = *(int *)arg;
	unsigned long *over = calloc(1, sizeof(*over));

	while (!atomic_load(&stop)) {
		struct hd_stats st;

		hd_stats(fd, &st);
		for (unsigned int n = 0; n < nnodes; n++)
			if (st.node[n] > (mode == FIXED_QUOTA ? lo[n] : hi[n]))
				(*over)++;
	}
	return over;
}

static void run(enum mode m)
{
	int fd = hd_open();
	struct worker w[THREADS];
	struct hd_quotas saved;
	struct hd_stats st;
	pthread_t prober, setter, sampler;
	uint64_t held_node[2] = { 0 }, held_bos = 0, held_pages = 0;
	unsigned int pins = 0, edquot = 0, exports = 0;
	unsigned long *hits, *sets = NULL, *over = NULL;
	long long pins0 = hd_foll_pins();

	mode = m;
	pg = hd_page();
	hd_need_nodes(2);
	nnodes = hd_online_nodes() >= 2 ? 2 : 1;
	hd_quotas_save(fd, &saved);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.node_bos, 0);
	for (unsigned int n = 0; n < nnodes; n++) {
		base[n] = st.node[n];
		/* lo: room for about half of what the threads try to hold. */
		lo[n] = base[n] + THREADS * KEEP * pg;
		hi[n] = base[n] + THREADS * KEEP * MAX_PAGES * pg;
		if (m == FIXED_QUOTA)
			KTAP_ASSERT_EQ(hd_quota_set(fd, n, lo[n], HACCEL_QUOTA_UNLIMITED), 0);
		if (m == RACING_QUOTA)
			KTAP_ASSERT_EQ(hd_quota_set(fd, n, hi[n], hi[n]), 0);
	}
	atomic_store(&stop, 0);
	for (int i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		for (int k = 0; k < KEEP; k++)
			w[i].slot[k].dmabuf = -1;
		w[i].fd = m == ONE_FILE || i == 0 ? fd : hd_open();
		for (unsigned int n = 0; n < nnodes; n++)
			w[i].mem[n] = hd_alloc(REGION * pg, (int)n);
		w[i].seed = ktap_rand() | 1;
	}
	if (quota_races())
		KTAP_ASSERT_EQ(pthread_create(&sampler, NULL, sample, &fd), 0);
	if (m == RACING_QUOTA)
		KTAP_ASSERT_EQ(pthread_create(&setter, NULL, quota_setter, &fd), 0);
	KTAP_ASSERT_EQ(pthread_create(&prober, NULL, probe, &w[0]), 0);
	for (int i = 0; i < THREADS; i++)
		KTAP_ASSERT_EQ(pthread_create(&w[i].tid, NULL, work, &w[i]), 0);
	for (int i = 0; i < THREADS; i++)
		KTAP_ASSERT_EQ(pthread_join(w[i].tid, NULL), 0);
	atomic_store(&stop, 1);
	KTAP_ASSERT_EQ(pthread_join(prober, (void **)&hits), 0);
	if (m == RACING_QUOTA)
		KTAP_ASSERT_EQ(pthread_join(setter, (void **)&sets), 0);
	if (quota_races()) {
		KTAP_ASSERT_EQ(pthread_join(sampler, (void **)&over), 0);
		KTAP_EXPECT_EQ(*over, 0);
	}

	/* What the threads still hold is exactly what the driver counts. */
	for (int i = 0; i < THREADS; i++) {
		uint64_t mine[2] = { 0 }, mine_bos = 0;

		KTAP_EXPECT_EQ(w[i].errors, 0);
		pins += w[i].pins;
		edquot += w[i].edquot;
		exports += w[i].exports;
		for (int k = 0; k < KEEP; k++) {
			const struct slot *s = &w[i].slot[k];

			if (!s->bytes)
				continue;
			mine[s->node] += s->bytes;
			mine_bos++;
		}
		/* The workers on the shared file are counted together, below. */
		if (w[i].fd != fd) {
			hd_stats(w[i].fd, &st);
			KTAP_EXPECT_EQ(st.s.client_total, mine[0] + mine[1]);
			KTAP_EXPECT_EQ(st.client[0], mine[0]);
			KTAP_EXPECT_EQ(st.client[1], mine[1]);
			KTAP_EXPECT_EQ(st.s.client_bos, mine_bos);
		}
		held_node[0] += mine[0];
		held_node[1] += mine[1];
		held_bos += mine_bos;
		held_pages += (mine[0] + mine[1]) / pg;
	}
	hd_stats(fd, &st);
	for (unsigned int n = 0; n < nnodes; n++)
		KTAP_EXPECT_EQ(st.node[n], base[n] + held_node[n]);
	KTAP_EXPECT_EQ(st.s.node_bos, held_bos);
	{
		uint64_t shared[2] = { 0 }, shared_bos = 0;

		for (int i = 0; i < THREADS; i++)
			for (int k = 0; k < KEEP && w[i].fd == fd; k++)
				if (w[i].slot[k].bytes) {
					shared[w[i].slot[k].node] += w[i].slot[k].bytes;
					shared_bos++;
				}
		KTAP_EXPECT_EQ(st.client[0], shared[0]);
		KTAP_EXPECT_EQ(st.client[1], shared[1]);
		KTAP_EXPECT_EQ(st.s.client_bos, shared_bos);
	}
	if (pins0 >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins0 + (long long)held_pages);
	ktap_diag("%u pins, %u over quota, %u exports, %lu probe exports, %lu quota sets; "
		  "%llu + %llu bytes in %llu buffers held at the end", pins, edquot, exports,
		  *hits, sets ? *sets : 0, (unsigned long long)held_node[0],
		  (unsigned long long)held_node[1], (unsigned long long)held_bos);
	KTAP_EXPECT(pins > 0 && exports > 0);
	if (quota_races())
		KTAP_EXPECT(edquot > 0);
	KTAP_EXPECT(held_bos > 0);
	free(hits);
	free(sets);
	free(over);

	/* Release everything: dma-bufs and handles, then the own files. */
	for (int i = 0; i < THREADS; i++) {
		for (int k = 0; k < KEEP; k++)
			slot_release(&w[i], &w[i].slot[k]);
		KTAP_EXPECT_EQ(w[i].errors, 0);
		if (w[i].fd != fd)
			close(w[i].fd);
	}
	hd_stats(fd, &st);
	for (unsigned int n = 0; n < nnodes; n++)
		KTAP_EXPECT_EQ(st.node[n], base[n]);
	KTAP_EXPECT_EQ(st.s.node_bos, 0);
	KTAP_EXPECT_EQ(st.s.client_total, 0);
	if (pins0 >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins0);
	hd_quotas_restore(fd, &saved);
}

static void threads_one_file(void)
{
	run(ONE_FILE);
}

static void threads_own_files(void)
{
	run(OWN_FILES);
}

static void threads_against_quota(void)
{
	run(FIXED_QUOTA);
}

static void threads_racing_quota_set(void)
{
	run(RACING_QUOTA);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(threads_one_file, 120),
	KTAP_CASE_TIMEOUT(threads_own_files, 120),
	KTAP_CASE_TIMEOUT(threads_against_quota, 120),
	KTAP_CASE_TIMEOUT(threads_racing_quota_set, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
