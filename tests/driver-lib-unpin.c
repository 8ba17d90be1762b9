// SPDX-License-Identifier: MIT
/* Memory the library pinned through haccel.ko is unpinned (driver and kernel counts back to where they were) after haccel_hostmem_free(), after haccel_close(), and when the process is SIGKILLed; a forked child's free leaves the parent's pins. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "haccel.h"
#include "driver-util.h"

#define MIB (1ull << 20)

static void free_unpins(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_hostmem *m[4];
	uint64_t base = hd_node_total(fd), sum = 0;
	long long pins = hd_foll_pins();
	struct hd_stats st;

	hd_stats(fd, &st);
	for (int k = 0; k < 4; k++) {
		/* Sizes that are not powers of two, one hugetlb-free THP size. */
		uint64_t bytes = (uint64_t)(k + 1) * MIB + (uint64_t)k * 4096;

		KTAP_ASSERT_EQ(hl_alloc(ctx, bytes, HACCEL_NODE_ANY, 0, &m[k]), 0);
		KTAP_EXPECT_EQ(haccel_hostmem_provider(m[k]), HACCEL_HOSTMEM_PROVIDER_DRIVER);
		sum += hl_info(m[k]).mapped_bytes;
	}
	KTAP_EXPECT_EQ(hd_node_total(fd), base + sum);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins + sum / hd_page());
	for (int k = 3; k >= 0; k--) {
		sum -= hl_info(m[k]).mapped_bytes;
		haccel_hostmem_free(m[k]);
		KTAP_EXPECT_EQ(hd_node_total(fd), base + sum);
	}
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	{
		struct hd_stats now;

		hd_stats(fd, &now);
		KTAP_EXPECT_EQ(now.s.node_bos, st.s.node_bos);
	}
	haccel_close(ctx);
	/* The context's driver file is gone with it. */
	if (hd_debugfs_clients_of(getpid()) >= 0)
		KTAP_EXPECT_EQ(hd_debugfs_clients_of(getpid()), 1);
}

/* A context closed with buffers its caller forgot still unpins them all:
 * closing the driver file releases every handle. */
static void close_unpins(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_hostmem *m;
	uint64_t base = hd_node_total(fd);

	KTAP_ASSERT_EQ(hl_alloc(ctx, 2 * MIB, HACCEL_NODE_ANY, 0, &m), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + 2 * MIB);
	haccel_close(ctx);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	/* m's mapping is leaked on purpose (its context is gone). */
	(void)m;
}

static void sigkill_unpins(void)
{
	int fd = hd_open(), pfd[2], status;
	struct hd_stats st;
	uint64_t base, base_bos, mapped;
	long long pins;
	pid_t pid;

	hd_stats(fd, &st);
	base = st.s.node_total;
	base_bos = st.s.node_bos;
	pins = hd_foll_pins();
	KTAP_ASSERT_EQ(pipe(pfd), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		struct haccel_ctx *ctx;
		struct haccel_hostmem *m[2];
		uint64_t sum = 0;

		close(pfd[0]);
		if (haccel_open(NULL, &ctx))
			_exit(2);
		for (int k = 0; k < 2; k++) {
			struct haccel_hostmem_info i;

			if (hl_alloc(ctx, 3 * MIB + 4096, HACCEL_NODE_ANY, 0, &m[k]) ||
			    haccel_hostmem_provider(m[k]) != HACCEL_HOSTMEM_PROVIDER_DRIVER ||
			    haccel_hostmem_info(m[k], &i))
				_exit(3);
			memset(i.ptr, 0x3c, (size_t)i.bytes);
			sum += i.mapped_bytes;
		}
		if (write(pfd[1], &sum, sizeof(sum)) != sizeof(sum))
			_exit(4);
		for (;;)
			pause();
	}
	close(pfd[1]);
	KTAP_ASSERT_EQ(read(pfd[0], &mapped, sizeof(mapped)), sizeof(mapped));
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.node_total, base + mapped);
	KTAP_EXPECT_EQ(st.s.node_bos, base_bos + 2);
	if (hd_debugfs_clients_of(pid) >= 0)
		KTAP_EXPECT_EQ(hd_debugfs_clients_of(pid), 1);
	KTAP_ASSERT_EQ(kill(pid, SIGKILL), 0);
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.node_total, base);
	KTAP_EXPECT_EQ(st.s.node_bos, base_bos);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	if (hd_debugfs_clients_of(pid) >= 0)
		KTAP_EXPECT_EQ(hd_debugfs_clients_of(pid), 0);
}

/*
 * A forked child shares the context's driver file; freeing its copy of a
 * buffer must not unpin the parent's pages (as its munmap would not unlock
 * them with mlock).
 */
static void forked_child_free_keeps_parent_pinned(void)
{
	int fd = hd_open(), status;
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_hostmem *m;
	uint64_t base = hd_node_total(fd);
	pid_t pid;

	KTAP_ASSERT_EQ(hl_alloc(ctx, 2 * MIB, HACCEL_NODE_ANY, 0, &m), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + 2 * MIB);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		haccel_hostmem_free(m);
		haccel_close(ctx);
		_exit(0);
	}
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + 2 * MIB);
	haccel_hostmem_free(m);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(free_unpins),
	KTAP_CASE(close_unpins),
	KTAP_CASE(sigkill_unpins),
	KTAP_CASE(forked_child_free_keeps_parent_pinned),
};

int main(int argc, char **argv)
{
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	return KTAP_MAIN(argc, argv, cases);
}
