// SPDX-License-Identifier: MIT
/* The weight-streaming path: io_uring O_DIRECT reads (fixed and plain buffers) into memory pinned by haccel.ko. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver-util.h"

#define CHUNK (256u << 10)
#define QD 4

/* The file's content: word i of the file is pattern(i); the VM runner writes it with --write-pattern. */
static uint64_t pattern(uint64_t i)
{
	uint64_t x = i + 0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static const char *data_path(void)
{
	const char *p = getenv("HACCEL_VM_DATA");

	return p ? p : "/mnt/data/weights.bin";
}

static int write_pattern(const char *path, uint64_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f) {
		perror(path);
		return 1;
	}
	for (uint64_t i = 0; i < size / 8; i++) {
		uint64_t v = pattern(i);

		if (fwrite(&v, 8, 1, f) != 1) {
			perror(path);
			fclose(f);
			return 1;
		}
	}
	return fclose(f) ? 1 : 0;
}

/* Words of buf (read from file offset off) that differ from the pattern. */
static size_t mismatches(const void *buf, size_t len, uint64_t off)
{
	const uint64_t *w = buf;
	size_t bad = 0;

	for (size_t i = 0; i < len / 8; i++)
		bad += w[i] != pattern(off / 8 + i);
	return bad;
}

/* Read the whole file with O_DIRECT into a pinned buffer, QD reads in flight. */
static void stream(int fixed)
{
	int fd = hd_open(), file;
	struct io_uring ring;
	struct stat sb;
	struct iovec iov;
	uint64_t size, off = 0, done = 0;
	unsigned int free_slots[QD], nfree = QD, slot;
	uint64_t data, at;
	char *buf;
	uint32_t h;
	int r;

	file = open(data_path(), O_RDONLY | O_DIRECT);
	if (file < 0)
		hd_missing("no O_DIRECT test file %s: %s", data_path(), strerror(errno));
	KTAP_ASSERT_EQ(fstat(file, &sb), 0);
	size = (uint64_t)sb.st_size;
	KTAP_ASSERT(size >= QD * CHUNK && size % CHUNK == 0);

	/* The staging buffer: anonymous memory, pinned by the driver and
	 * (fixed) registered with io_uring, as the loader does it. */
	buf = hd_alloc(QD * CHUNK, -1);
	memset(buf, 0, QD * CHUNK);
	KTAP_ASSERT_EQ(hd_pin(fd, buf, QD * CHUNK, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	KTAP_ASSERT_EQ(io_uring_queue_init(QD, &ring, 0), 0);
	if (fixed) {
		iov.iov_base = buf;
		iov.iov_len = QD * CHUNK;
		KTAP_ASSERT_EQ(io_uring_register_buffers(&ring, &iov, 1), 0);
	}

	for (unsigned int i = 0; i < QD; i++)
		free_slots[i] = i;
	/* Reads complete in any order: each goes to a slot no read is using,
	 * and user data carries offset | slot (offsets are CHUNK-aligned). */
	while (done < size) {
		struct io_uring_cqe *cqe;

		while (nfree && off < size) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			KTAP_ASSERT(sqe != NULL);
			slot = free_slots[--nfree];
			if (fixed)
				io_uring_prep_read_fixed(sqe, file, buf + slot * CHUNK,
							 CHUNK, off, 0);
			else
				io_uring_prep_read(sqe, file, buf + slot * CHUNK, CHUNK, off);
			io_uring_sqe_set_data64(sqe, off | slot);
			off += CHUNK;
		}
		KTAP_ASSERT(io_uring_submit(&ring) >= 0);
		r = io_uring_wait_cqe(&ring, &cqe);
		KTAP_ASSERT_EQ(r, 0);
		data = io_uring_cqe_get_data64(cqe);
		at = data & ~(uint64_t)(CHUNK - 1);
		slot = (unsigned int)(data & (CHUNK - 1));
		if (cqe->res != (int)CHUNK)
			ktap_diag("read at %llu: %d", (unsigned long long)at, cqe->res);
		KTAP_ASSERT_EQ(cqe->res, CHUNK);
		KTAP_EXPECT_EQ(mismatches(buf + slot * CHUNK, CHUNK, at), 0);
		io_uring_cqe_seen(&ring, cqe);
		free_slots[nfree++] = slot;
		done += CHUNK;
	}
	ktap_diag("%llu bytes read with O_DIRECT (%s buffer)",
		  (unsigned long long)size, fixed ? "fixed" : "plain");
	if (fixed)
		KTAP_EXPECT_EQ(io_uring_unregister_buffers(&ring), 0);
	io_uring_queue_exit(&ring);
	close(file);
	/* The driver's pin never got in io_uring's way, nor the other way round. */
	{
		struct hd_stats st;

		hd_stats(fd, &st);
		KTAP_EXPECT_EQ(st.s.client_total, QD * CHUNK);
	}
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void odirect_read_fixed_buffer(void)
{
	stream(1);
}

static void odirect_read_plain_buffer(void)
{
	stream(0);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(odirect_read_fixed_buffer),
	KTAP_CASE(odirect_read_plain_buffer),
};

int main(int argc, char **argv)
{
	/* Host side of the VM runner: write the file the guest reads. */
	if (argc == 4 && !strcmp(argv[1], "--write-pattern"))
		return write_pattern(argv[2], strtoull(argv[3], NULL, 0));
	return KTAP_MAIN(argc, argv, cases);
}
