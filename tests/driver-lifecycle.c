// SPDX-License-Identifier: MIT
/* Buffer lifetime: pages unpinned at handle close, fd close and process death (SIGKILL, also in the middle of a large PIN), dma-bufs keeping them, the debugfs client list. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver-util.h"

#define SIZE (256u << 10)

static void handle_close_unpins(void)
{
	int fd = hd_open();
	char *mem = hd_alloc(SIZE, -1);
	uint64_t base = hd_node_total(fd);
	long long pins = hd_foll_pins();
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + SIZE);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins + SIZE / hd_page());
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
}

static void fd_close_unpins(void)
{
	int fd = hd_open(), fd2 = hd_open();
	char *mem = hd_alloc(SIZE, -1);
	uint64_t base = hd_node_total(fd);
	uint32_t h;

	for (int i = 0; i < 3; i++)
		KTAP_ASSERT_EQ(hd_pin(fd2, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + 3 * SIZE);
	close(fd2);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
}

/* A pinned range may be unmapped: the pages stay pinned until the close. */
static void munmap_while_pinned(void)
{
	int fd = hd_open();
	char *mem = hd_alloc(SIZE, -1);
	uint64_t base = hd_node_total(fd);
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_ASSERT_EQ(munmap(mem, SIZE), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + SIZE);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
}

/*
 * A child pins on its own file (and optionally exports and maps a dma-buf),
 * reports, and is killed with SIGKILL: everything it held goes.
 */
static void kill_pinning_child(int with_dmabuf)
{
	int fd = hd_open(), pfd[2], status;
	struct hd_stats st;
	uint64_t base, base_bos;
	long long pins;
	char byte;
	pid_t pid;

	hd_stats(fd, &st);
	base = st.s.node_total;
	base_bos = st.s.node_bos;
	pins = hd_foll_pins();

	KTAP_ASSERT_EQ(pipe(pfd), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		int cfd = hd_try_open();
		char *mem = hd_alloc(4 * SIZE, -1);
		uint32_t h;

		if (cfd < 0)
			_exit(2);
		for (int i = 0; i < 4; i++)
			if (hd_pin(cfd, mem + i * SIZE, SIZE, HACCEL_DRM_NODE_ANY, 0, &h))
				_exit(3);
		if (with_dmabuf) {
			int dmabuf = hd_export(cfd, h, 0);

			if (dmabuf < 0 || mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
					       MAP_SHARED, dmabuf, 0) == MAP_FAILED)
				_exit(4);
		}
		if (write(pfd[1], "p", 1) != 1)
			_exit(5);
		for (;;)
			pause();
	}
	close(pfd[1]);
	KTAP_ASSERT_EQ(read(pfd[0], &byte, 1), 1);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.node_total, base + 4 * SIZE);
	KTAP_ASSERT_EQ(kill(pid, SIGKILL), 0);
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	hd_stats(fd, &st);
	KTAP_EXPECT_EQ(st.s.node_total, base);
	KTAP_EXPECT_EQ(st.s.node_bos, base_bos);
	/* The kernel agrees: every page the child had pinned is unpinned. */
	if (pins >= 0)
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
}

static void sigkill_unpins(void)
{
	kill_pinning_child(0);
}

static void sigkill_with_dmabuf_unpins(void)
{
	kill_pinning_child(1);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

#define BIG (32u << 20)
#define KILL_ROUNDS 10

/*
 * SIGKILL while a large PIN faults in and pins its range: the PIN unwinds
 * (the -EINTR path of hac_pin_pages(), which nobody sees), and nothing
 * stays pinned or charged: the node-wide bytes and buffers back where they
 * were and the kernel's FOLL_PIN counters balanced, every round. A child
 * says when it enters the ioctl and again when it returns; the parent
 * kills it after a delay between a tenth and nine tenths of what a whole
 * PIN of the same range takes (measured first), so most kills land inside
 * the call, which the missing second message shows.
 */
static void sigkill_during_large_pin(void)
{
	int fd = hd_open(), status;
	struct hd_stats st;
	uint64_t base, base_bos, t0, full_us;
	long long pins = hd_foll_pins();
	unsigned int interrupted = 0;
	char *mem;
	uint32_t h;

	hd_stats(fd, &st);
	base = st.s.node_total;
	base_bos = st.s.node_bos;
	/* Untouched memory, as the child's: the PIN faults every page in. */
	mem = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	KTAP_ASSERT(mem != MAP_FAILED);
	t0 = now_us();
	KTAP_ASSERT_EQ(hd_pin(fd, mem, BIG, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	full_us = now_us() - t0;
	KTAP_ASSERT_EQ(hd_close_handle(fd, h), 0);
	KTAP_ASSERT_EQ(munmap(mem, BIG), 0);
	ktap_diag("a PIN of %u MiB takes %llu us", BIG >> 20, (unsigned long long)full_us);

	for (int round = 0; round < KILL_ROUNDS; round++) {
		int pfd[2];
		char msg[2];
		ssize_t n;
		pid_t pid;

		KTAP_ASSERT_EQ(pipe(pfd), 0);
		pid = fork();
		KTAP_ASSERT(pid >= 0);
		if (pid == 0) {
			int cfd = hd_try_open();
			char *cmem = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			uint32_t ch;

			close(pfd[0]);
			if (cfd < 0 || cmem == MAP_FAILED || write(pfd[1], "p", 1) != 1)
				_exit(2);
			if (hd_pin(cfd, cmem, BIG, HACCEL_DRM_NODE_ANY, 0, &ch) == 0 &&
			    write(pfd[1], "d", 1) != 1)
				_exit(3);
			for (;;)
				pause();
		}
		close(pfd[1]);
		KTAP_ASSERT_EQ(read(pfd[0], msg, 1), 1);
		usleep((useconds_t)(full_us / 10 + ktap_rand_below(full_us * 8 / 10 + 1)));
		KTAP_ASSERT_EQ(kill(pid, SIGKILL), 0);
		KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
		KTAP_EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		n = read(pfd[0], msg, 1);
		interrupted += n == 0;
		close(pfd[0]);
		hd_stats(fd, &st);
		KTAP_EXPECT_EQ(st.s.node_total, base);
		KTAP_EXPECT_EQ(st.s.node_bos, base_bos);
		if (pins >= 0)
			KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	}
	ktap_diag("%u of %d kills landed inside the PIN", interrupted, KILL_ROUNDS);
	KTAP_EXPECT(interrupted > 0);
}

/*
 * Count the debugfs client lines of pid in state (any state if NULL);
 * bos and bytes get the last such line's buffers and bytes on nodes 0-1.
 */
static int debugfs_client(pid_t pid, const char *want, unsigned long long *bos,
			  unsigned long long *bytes)
{
	FILE *f = fopen("/sys/kernel/debug/haccel/clients", "r");
	char line[512];
	int found = 0;

	if (!f)
		hd_missing("no /sys/kernel/debug/haccel/clients (debugfs not mounted?)");
	*bytes = 0;
	while (fgets(line, sizeof(line), f)) {
		char comm[32], st[16];
		unsigned long long b, n0 = 0, n1 = 0;
		int p;

		if (sscanf(line, "%d %31s %15s %llu %llu %llu", &p, comm, st, &b,
			   &n0, &n1) < 5 || p != pid || (want && strcmp(st, want)))
			continue;
		found++;
		*bos = b;
		*bytes = n0 + n1;
	}
	fclose(f);
	return found;
}

static void debugfs_lists_clients(void)
{
	int fd = hd_open();
	char *mem = hd_alloc(SIZE, -1), header[256];
	unsigned long long bos, bytes;
	uint32_t h;
	FILE *f;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_ASSERT_EQ(debugfs_client(getpid(), "open", &bos, &bytes), 1);
	KTAP_EXPECT_EQ(bos, 1);
	KTAP_EXPECT_EQ(bytes, SIZE);
	f = fopen("/sys/kernel/debug/haccel/clients", "r");
	KTAP_ASSERT(f && fgets(header, sizeof(header), f));
	KTAP_EXPECT(strstr(header, "pid") && strstr(header, "command") &&
		    strstr(header, "node0"));
	fclose(f);
	f = fopen("/sys/kernel/debug/haccel/nodes", "r");
	KTAP_ASSERT(f && fgets(header, sizeof(header), f));
	KTAP_EXPECT(strstr(header, "node_limit") != NULL);
	fclose(f);
	close(fd);
	KTAP_EXPECT_EQ(debugfs_client(getpid(), NULL, &bos, &bytes), 0);
}

/* An exported buffer outlives its file and handle; the charge stays with its client. */
static void dmabuf_outlives_file(void)
{
	int fd = hd_open(), fd2 = hd_open(), dmabuf;
	char *mem = hd_alloc(SIZE, -1);
	unsigned long long bos, bytes;
	uint64_t base = hd_node_total(fd);
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd2, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	dmabuf = hd_export(fd2, h, 0);
	KTAP_ASSERT(dmabuf >= 0);
	close(fd2);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + SIZE);
	KTAP_EXPECT_EQ(debugfs_client(getpid(), "closed", &bos, &bytes), 1);
	KTAP_EXPECT_EQ(bos, 1);
	KTAP_EXPECT_EQ(bytes, SIZE);
	close(dmabuf);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
	KTAP_EXPECT_EQ(debugfs_client(getpid(), "closed", &bos, &bytes), 0);
}

static void double_close_is_einval(void)
{
	int fd = hd_open();
	char *mem = hd_alloc(SIZE, -1);
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), -EINVAL);
}

/* A fork shares the file: the buffer lives until both copies close it. */
static void forked_file_shares_buffers(void)
{
	int fd = hd_open(), status;
	char *mem = hd_alloc(SIZE, -1);
	uint64_t base = hd_node_total(fd);
	uint32_t h;
	pid_t pid;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, SIZE, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		/* The child writes to its copy-on-write view: never to the
		 * parent's pinned pages. */
		memset(mem, 0x11, SIZE);
		_exit(0);
	}
	KTAP_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	KTAP_EXPECT_EQ(hd_node_total(fd), base + SIZE);
	KTAP_EXPECT_EQ(mem[0], 0x5a);
	KTAP_EXPECT_EQ(mem[SIZE - 1], 0x5a);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
	KTAP_EXPECT_EQ(hd_node_total(fd), base);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(handle_close_unpins),
	KTAP_CASE(fd_close_unpins),
	KTAP_CASE(munmap_while_pinned),
	KTAP_CASE(sigkill_unpins),
	KTAP_CASE(sigkill_with_dmabuf_unpins),
	KTAP_CASE_TIMEOUT(sigkill_during_large_pin, 120),
	KTAP_CASE(debugfs_lists_clients),
	KTAP_CASE(dmabuf_outlives_file),
	KTAP_CASE(double_close_is_einval),
	KTAP_CASE(forked_file_shares_buffers),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
