// SPDX-License-Identifier: MIT
/* Four threads pinning and unpinning for thousands of rounds: node-wide and per-client statistics exact, quotas never overrun. */
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
#define REGION 32	/* pages of memory per thread */

struct worker {
	pthread_t tid;
	int fd;			/* shared or own file */
	char *mem;
	uint64_t seed;
	uint32_t handle[KEEP];
	uint64_t bytes[KEEP];	/* 0: slot empty */
	unsigned int pins, edquot, errors;
};

static size_t pg;
static atomic_int stop_sampling;
static uint64_t limit_bytes;	/* for the quota race; 0: no limit checked */

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int round = 0; round < ROUNDS; round++) {
		unsigned int slot = next(&w->seed) % KEEP;
		uint64_t npages = 1 + next(&w->seed) % 4;
		uint64_t off = next(&w->seed) % (REGION - npages + 1);
		int r;

		if (w->bytes[slot]) {
			if (hd_close_handle(w->fd, w->handle[slot]))
				w->errors++;
			w->bytes[slot] = 0;
			continue;
		}
		r = hd_pin(w->fd, w->mem + off * pg, npages * pg, 0, 0,
			   &w->handle[slot]);
		if (r == 0) {
			w->bytes[slot] = npages * pg;
			w->pins++;
		} else if (r == -EDQUOT && limit_bytes) {
			w->edquot++;
		} else {
			w->errors++;
		}
	}
	return NULL;
}

/* Checks, all run long, that node 0 never holds more than the limit. */
static void *sample(void *arg)
{
	int fd = *(int *)arg;
	unsigned int *over = calloc(1, sizeof(*over));

	while (!atomic_load(&stop_sampling)) {
		struct hd_stats st;

		hd_stats(fd, &st);
		if (st.node[0] > limit_bytes)
			(*over)++;
	}
	return over;
}

static void run(int shared_fd, int with_quota)
{
	int fd = hd_open();
	struct worker w[THREADS];
	struct hd_quotas saved;
	struct hd_stats st;
	pthread_t sampler;
	uint64_t held = 0, held_bos = 0, base;
	unsigned int pins = 0, edquot = 0, *over = NULL;

	pg = hd_page();
	hd_quotas_save(fd, &saved);
	base = hd_node_used(fd, 0);
	limit_bytes = 0;
	if (with_quota) {
		/* Room for about half of what the threads try to hold. */
		limit_bytes = base + THREADS * KEEP * pg;
		KTAP_ASSERT_EQ(hd_quota_set(fd, 0, limit_bytes,
					    HACCEL_QUOTA_UNLIMITED), 0);
		atomic_store(&stop_sampling, 0);
		KTAP_ASSERT_EQ(pthread_create(&sampler, NULL, sample, &fd), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].fd = shared_fd ? fd : hd_open();
		w[i].mem = hd_alloc(REGION * pg, 0);
		w[i].seed = ktap_rand() | 1;
		KTAP_ASSERT_EQ(pthread_create(&w[i].tid, NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		KTAP_ASSERT_EQ(pthread_join(w[i].tid, NULL), 0);
	if (with_quota) {
		atomic_store(&stop_sampling, 1);
		KTAP_ASSERT_EQ(pthread_join(sampler, (void **)&over), 0);
		KTAP_EXPECT_EQ(*over, 0);
		free(over);
	}

	/* What the threads still hold is exactly what the driver counts. */
	for (int i = 0; i < THREADS; i++) {
		uint64_t mine = 0, mine_bos = 0;

		KTAP_EXPECT_EQ(w[i].errors, 0);
		pins += w[i].pins;
		edquot += w[i].edquot;
		for (int k = 0; k < KEEP; k++) {
			mine += w[i].bytes[k];
			mine_bos += w[i].bytes[k] != 0;
		}
		if (!shared_fd) {
			hd_stats(w[i].fd, &st);
			KTAP_EXPECT_EQ(st.s.client_total, mine);
			KTAP_EXPECT_EQ(st.client[0], mine);
			KTAP_EXPECT_EQ(st.s.client_bos, mine_bos);
		}
		held += mine;
		held_bos += mine_bos;
	}
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.node[0], base + held);
	KTAP_EXPECT_EQ(st.s.node_bos, held_bos);
	if (shared_fd) {
		KTAP_EXPECT_EQ(st.s.client_total, held);
		KTAP_EXPECT_EQ(st.s.client_bos, held_bos);
	}
	ktap_diag("%u pins, %u over quota, %llu bytes held at the end", pins,
		  edquot, (unsigned long long)held);
	if (with_quota)
		KTAP_EXPECT(edquot > 0);

	for (int i = 0; i < THREADS; i++) {
		if (shared_fd) {
			for (int k = 0; k < KEEP; k++)
				if (w[i].bytes[k])
					KTAP_EXPECT_EQ(hd_close_handle(fd, w[i].handle[k]), 0);
		} else {
			close(w[i].fd);
		}
	}
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.node[0], base);
	KTAP_EXPECT_EQ(st.s.node_bos, 0);
	KTAP_EXPECT_EQ(st.s.client_total, 0);
	hd_quotas_restore(fd, &saved);
}

static void threads_one_file(void)
{
	run(1, 0);
}

static void threads_own_files(void)
{
	run(0, 0);
}

static void threads_against_quota(void)
{
	run(0, 1);
}

static const struct ktap_case cases[] = {
	KTAP_CASE_TIMEOUT(threads_one_file, 120),
	KTAP_CASE_TIMEOUT(threads_own_files, 120),
	KTAP_CASE_TIMEOUT(threads_against_quota, 120),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
