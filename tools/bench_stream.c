// SPDX-License-Identifier: MIT
/*
 * haccel-bench stream PATH: how fast the loader gets a checkpoint into
 * memory, beside the two figures that frame it, measured in the same run:
 *
 *  - the disk ceiling: raw sequential O_DIRECT reads of the same files with
 *    io_uring, the best over queue depths 1..64 and block sizes 1..16 MiB
 *    (one queue, as `dd iflag=direct` does, shows only part of a disk);
 *  - a plain mmap + memcpy loader, what a simple loader does;
 *  - for warm runs, the memory ceiling: the same bytes copied by as many
 *    threads as the loader has from mappings of the files already in the
 *    page cache (faulted in first) into the same destination. A warm load
 *    is bound by memory bandwidth, not by the disk.
 *
 * Cold runs drop the files from the page cache first (posix_fadvise
 * DONTNEED, checked with cachestat, else mincore; root may also use
 * drop_caches) and say whether that worked; warm runs read the files into
 * the cache first. Where residency cannot be known (cachestat refused or
 * missing, and mincore lies about files this user may not write) the
 * report says "unknown". Every destination is faulted in before the clock
 * starts, for all loaders.
 *
 * --create SIZE writes a synthetic checkpoint at PATH first (bf16 tensors of
 * uneven sizes, so none is aligned, with stored checksums).
 *
 * --device cuda loads into GPU memory through the GPU sink instead, cold
 * and warm, and measures one more ceiling beside each run: pinned
 * host-to-device copies, 64 MiB cuMemcpyHtoDAsync calls from a 1 GiB
 * registered buffer. It drives the same GPU sink by hand (begin() with the
 * buffer as sixteen 64 MiB "staging buffers", put() of each in turn,
 * finish()), so the ceiling and the loads share one copy path; the cold
 * figure is bounded by the smaller of the two ceilings.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "common.h"
#include "gpu/cuda.h"
#include "haccel.h"
#include "weights/stream.h"
#include "weights/weights.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

struct sopts {
	const char *path;
	const char *create_arg;     /* --create as given */
	uint64_t create;
	double probe_seconds;
	unsigned int repeat;
	uint32_t qd, chunk, threads;
	int as_given;               /* --queue-depth or --chunk given */
	uint32_t ceil_qd, ceil_bs;  /* --ceiling: skip the sweep */
	int cold, warm, verify;
	int cuda;                   /* --device cuda */
	int allow_unpinned;         /* --allow-unpinned */
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-bench [--json] stream PATH [OPTIONS]\n"
		"\n"
		"PATH is a .safetensors file, an index, or a directory (see haccel-ctl weights).\n"
		"\n"
		"Options:\n"
		"  --create SIZE       first write a synthetic checkpoint of SIZE bytes at PATH\n"
		"                      (at least 4096; K/M/G/T suffixes): written beside it as\n"
		"                      PATH.tmp-XXXXXX, renamed when complete, removed on a\n"
		"                      failure or SIGINT/SIGTERM/SIGHUP; progress on stderr\n"
		"                      when it is a terminal. Refused up front: an existing\n"
		"                      PATH, a SIZE whose header would pass the safetensors\n"
		"                      limit (100000000 bytes), or more than the free space\n"
		"                      of PATH's file system\n"
		"  --cold | --warm     only cold (page cache dropped) or warm runs (default both)\n"
		"  --repeat N          runs per figure, 1..64, median reported (default 3)\n"
		"  --probe-seconds S   time per disk-ceiling probe, up to 60 (default 1.0)\n"
		"  --ceiling QD,SIZE   measure the ceiling at this depth and block size only\n"
		"                      (default: the best of a sweep over 1-64 x 1-16 MiB)\n"
		"  --queue-depth N     loader reads in flight, 1..4096 (default 32)\n"
		"  --chunk SIZE        loader read size, a multiple of 4096 from 64K to 256M\n"
		"                      (default 4M); without either of these two, warm\n"
		"                      loads into GPU memory take the loader's cap\n"
		"                      (2M reads, 8 in flight at that size)\n"
		"  --threads N         loader threads, 1..256 (default 8)\n"
		"  --verify            also check stored checksums during haccel loads\n"
		"  --allow-unpinned    if the loader's staging buffers cannot be locked or\n"
		"                      registered with io_uring (RLIMIT_MEMLOCK), use unpinned,\n"
		"                      unregistered ones (reported; cold figures suffer)\n"
		"  --device host|cuda  load into host memory (default) or into GPU memory,\n"
		"                      beside the pinned host-to-device copy ceiling\n"
		"  -j, --json          JSON on stdout\n"
		"  -h, --help          this help\n");
}

/* --- synthetic checkpoint ------------------------------------------------- */

static void fill_random(uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (uint64_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (uint64_t i = n & ~7ull; i < n; i++)
		p[i] = (uint8_t)(x >> (8 * (i & 7)));
}

/* Tensors of uneven bf16 sizes around 48 MiB: offsets land anywhere. */
#define CREATE_TENSOR (48ull << 20)
#define CREATE_COLS (CREATE_TENSOR / 2 / 64)
#define CREATE_MAX_TENSOR (97 * (CREATE_COLS + 4098) * 2)

/* Tensor i of a checkpoint of size bytes, at data offset off: its rows and
 * columns. false when none fits in what is left. */
static bool tensor_shape(uint64_t i, uint64_t off, uint64_t size, uint64_t *rows, uint64_t *cols)
{
	uint64_t r = 1 + (i * 7919) % 97, c = CREATE_COLS + (i * 104729) % 4099;

	if (off >= size)
		return false;
	if (r * c * 2 > size - off) {
		c = (size - off) / 2 / r;
		if (!c)
			return false;
	}
	*rows = r;
	*cols = c;
	return true;
}

/* Append what fmt makes at *p, unless *p is NULL; returns its length. The
 * longest piece, a tensor entry with five 20-digit numbers, is 165 bytes. */
static uint64_t put(char **p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint64_t put(char **p, const char *fmt, ...)
{
	char tmp[192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (*p) {
		memcpy(*p, tmp, (size_t)n);
		*p += n;
	}
	return (uint64_t)n;
}

/*
 * The header (compact JSON) of a synthetic checkpoint of size bytes,
 * written at dst, or only measured when dst is NULL; the checksums from
 * sums, or zeros (the same length) when NULL. Stops as soon as it passes
 * limit bytes. Returns its length; *n is the tensor count, *data the bytes
 * they cover (when it stopped early: those measured so far).
 */
static uint64_t header_json(char *dst, uint64_t size, const uint64_t *sums, uint64_t limit,
			    uint64_t *n, uint64_t *data)
{
	uint64_t len, off = 0, i, rows, cols;
	char *p = dst;

	len = put(&p, "{");
	for (i = 0; len <= limit && tensor_shape(i, off, size, &rows, &cols); i++) {
		uint64_t bytes = rows * cols * 2;

		len += put(&p, "\"layers.%llu.weight\":{\"dtype\":\"BF16\",\"shape\":[%llu,%llu],"
			       "\"data_offsets\":[%llu,%llu]},",
			   (unsigned long long)i, (unsigned long long)rows,
			   (unsigned long long)cols, (unsigned long long)off,
			   (unsigned long long)(off + bytes));
		off += bytes;
	}
	*n = i;
	*data = off;
	len += put(&p, "\"__metadata__\":{");
	for (i = 0; len <= limit && i < *n; i++)
		len += put(&p, "%s\"%slayers.%llu.weight\":\"%016llx\"", i ? "," : "",
			   HACCEL_CHECKSUM_PREFIX, (unsigned long long)i,
			   (unsigned long long)(sums ? sums[i] : 0));
	len += put(&p, "}}");
	return len;
}

/* The temporary file of --create, removed if a signal ends the run. */
static volatile sig_atomic_t create_tmp_live;
static char create_tmp[PATH_MAX + 16];

static void create_signal(int sig)
{
	if (create_tmp_live)
		unlink(create_tmp);
	/* SA_RESETHAND restored the default: this ends the process. */
	raise(sig);
}

/* rename(2) that refuses to replace an existing file. */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef SYS_renameat2
	if (!syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
#endif
	/* No RENAME_NOREPLACE here: link() refuses an existing name too. */
	if (link(from, to))
		return -1;
	unlink(from);
	return 0;
}

static int write_all(int fd, const void *p, uint64_t n, uint64_t off)
{
	for (uint64_t w = 0; w < n;) {
		ssize_t r = pwrite(fd, (const char *)p + w, n - w > (1u << 30) ? 1u << 30 : n - w,
				   (off_t)(off + w));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (!r)
				errno = EIO;
			return -1;
		}
		w += (uint64_t)r;
	}
	return 0;
}

/* "\rwriting 1.20 / 4.00 GB  1.10 GB/s  ETA 3 s" on a terminal, as the
 * loader's progress (HACCEL_LOAD_PROGRESS) is shown; at most 4 a second. */
static void create_progress(uint64_t done, uint64_t total, uint64_t t0, uint64_t *last, bool final)
{
	uint64_t t = tool_now_ns();
	double secs = (double)(t - t0) / 1e9, rate = secs > 0 ? (double)done / secs : 0;

	if (!final && t - *last < 250000000ull)
		return;
	*last = t;
	fprintf(stderr, "\r%s: stream: --create: writing %.2f / %.2f GB  %.2f GB/s  ETA %.0f s   %s",
		tool_name, (double)done / 1e9, (double)total / 1e9, rate / 1e9,
		rate > 0 ? (double)(total - done) / rate : 0.0, final ? "\n" : "");
	fflush(stderr);
}

/*
 * Write a synthetic checkpoint of about size bytes at path (arg: --create's
 * text, for messages). Refused before anything is allocated or written
 * when the header would pass the safetensors limit or the file system
 * lacks the space. Written to path.tmp-XXXXXX beside it and renamed into
 * place when complete (never over an existing file); the temporary file is
 * removed on any failure and on SIGINT, SIGTERM or SIGHUP. 0 or -1.
 */
static int create_checkpoint(const char *path, const char *arg, uint64_t size)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old[3];
	sigset_t block, prev;
	struct statvfs vfs;
	struct stat sb;
	char dir[PATH_MAX], b[2][32], *text = NULL, *slash;
	uint64_t n, n2, data, data2, hlen, total, avail, *sums = NULL, done = 0, t0, last = 0;
	uint8_t *buf = NULL, len8[8];
	bool tty = isatty(STDERR_FILENO), shown = false;
	mode_t mask;
	int fd = -1, ret = -1, e;

	if (lstat(path, &sb) == 0) {
		tool_err("stream: --create: %s already exists (it is not overwritten)", path);
		return -1;
	}
	if (strlen(path) >= PATH_MAX) {
		tool_err("stream: --create: %s: %s", path, strerror(ENAMETOOLONG));
		return -1;
	}
	/* Measured, not built: a SIZE too large is refused here. */
	hlen = header_json(NULL, size, NULL, HACCEL__ST_MAX_HEADER, &n, &data);
	if (hlen > HACCEL__ST_MAX_HEADER) {
		tool_err("stream: --create %s: its header would pass the safetensors header limit of %u bytes (reached within its first %s); give a smaller SIZE",
			 arg, HACCEL__ST_MAX_HEADER, tool_bytes(data, b[0], sizeof(b[0])));
		return -1;
	}
	total = 8 + hlen + data;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir] = '\0';
	if (statvfs(dir, &vfs)) {
		tool_err("stream: --create: %s: %s", dir, strerror(errno));
		return -1;
	}
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (total > avail) {
		tool_err("stream: --create %s: needs %llu bytes (%s), but the file system of %s has %llu bytes (%s) free",
			 arg, (unsigned long long)total, tool_bytes(total, b[0], sizeof(b[0])), dir,
			 (unsigned long long)avail, tool_bytes(avail, b[1], sizeof(b[1])));
		return -1;
	}

	/* The temporary file and the handlers that remove it, with the
	 * signals held off between its creation and its name being known. */
	snprintf(create_tmp, sizeof(create_tmp), "%s.tmp-XXXXXX", path);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = create_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&block);
	for (int k = 0; k < 3; k++)
		sigaddset(&block, sigs[k]);
	sigprocmask(SIG_BLOCK, &block, &prev);
	for (int k = 0; k < 3; k++) {
		sigaction(sigs[k], NULL, &old[k]);
		/* Ignored stays ignored (nohup). */
		if (old[k].sa_handler != SIG_IGN)
			sigaction(sigs[k], &sa, NULL);
	}
	fd = mkostemp(create_tmp, O_CLOEXEC);
	e = errno;
	if (fd >= 0)
		create_tmp_live = 1;
	sigprocmask(SIG_SETMASK, &prev, NULL);
	if (fd < 0) {
		tool_err("stream: --create: %s: %s", create_tmp, strerror(e));
		goto out;
	}
	mask = umask(0);
	umask(mask);
	fchmod(fd, 0644 & ~mask);

	buf = malloc(size < CREATE_MAX_TENSOR ? size : CREATE_MAX_TENSOR);
	sums = calloc(n ? n : 1, sizeof(*sums));
	text = malloc(hlen + 1);
	if (!buf || !sums || !text) {
		errno = ENOMEM;
		goto io;
	}
	/* The tensors first, after room for the header, each hashed as it is
	 * written; then the header, whose length does not depend on the
	 * checksums. */
	t0 = tool_now_ns();
	for (uint64_t i = 0, off = 0, rows = 0, cols = 0; i < n; i++) {
		uint64_t bytes;

		tensor_shape(i, off, size, &rows, &cols);
		bytes = rows * cols * 2;
		fill_random(buf, bytes, i + 1);
		sums[i] = XXH3_64bits(buf, bytes);
		if (write_all(fd, buf, bytes, 8 + hlen + off))
			goto io;
		off += bytes;
		done += bytes;
		if (tty) {
			create_progress(done, data, t0, &last, false);
			shown = true;
		}
	}
	if (header_json(text, size, sums, UINT64_MAX, &n2, &data2) != hlen || n2 != n) {
		errno = EPROTO;
		goto io;
	}
	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)(hlen >> (8 * i));
	if (write_all(fd, len8, 8, 0) || write_all(fd, text, hlen, 8) || fsync(fd))
		goto io;
	if (close(fd)) {
		fd = -1;
		goto io;
	}
	fd = -1;
	if (rename_noreplace(create_tmp, path)) {
		e = errno;
		if (shown)
			fputc('\n', stderr);
		tool_err("stream: --create: cannot rename %s to %s: %s", create_tmp, path,
			 strerror(e));
		unlink(create_tmp);
		goto out;
	}
	if (tty)
		create_progress(done, data, t0, &last, true);
	ret = 0;
	goto out;
io:
	e = errno;
	if (shown)
		fputc('\n', stderr);
	tool_err("stream: --create: writing %s: %s", create_tmp, strerror(e));
	unlink(create_tmp);
out:
	create_tmp_live = 0;
	if (fd >= 0)
		close(fd);
	for (int k = 0; k < 3; k++)
		sigaction(sigs[k], &old[k], NULL);
	free(text);
	free(sums);
	free(buf);
	return ret;
}

/* --- page cache ----------------------------------------------------------- */

/*
 * Fraction of path's pages in the page cache, or -1 when it cannot be
 * known (the loader's own judgement: haccel__file_resident_pages).
 */
static double resident_fraction(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t res = 0, pages = 0;
	struct stat sb;
	char why[512];
	int ret = -1;

	if (fd >= 0 && fstat(fd, &sb) == 0)
		ret = haccel__file_resident_pages(fd, path, (uint64_t)sb.st_size, &res, &pages, why,
						  sizeof(why));
	if (fd >= 0)
		close(fd);
	if (ret)
		return -1;
	return pages ? (double)res / (double)pages : 1.0;
}

/* Of each file's residency, the largest (worst, for a cold run) or the
 * smallest; -1 when any is unknown. */
static double residency(struct haccel_weights *w, int largest)
{
	struct haccel_weights_info info;
	double v = largest ? 0 : 1;

	haccel_weights_info(w, &info);
	for (uint32_t f = 0; f < info.n_files; f++) {
		double r = resident_fraction(haccel_weights_file(w, f));

		if (r < 0)
			return -1;
		if (largest ? r > v : r < v)
			v = r;
	}
	return v;
}

/* "12.5% still cached at worst" or why it is not known. */
static const char *residency_text(double r, const char *what, char *buf, size_t len)
{
	if (r < 0)
		snprintf(buf, len, "residency unknown: cachestat refused and mincore unreliable for files this user may not write");
	else
		snprintf(buf, len, "%.1f%% %s", 100 * r, what);
	return buf;
}

static json_t *residency_json(double r)
{
	return r < 0 ? json_null() : json_real(r);
}

/* The worse of two residencies after a drop; unknown stays unknown. */
static double worse(double a, double b)
{
	return a < 0 || b < 0 ? -1 : a > b ? a : b;
}

/* Drop the files from the page cache; returns the fraction still cached
 * (the worst file's), or -1 when that cannot be known. */
static double drop_cache(struct haccel_weights *w, const char **how)
{
	struct haccel_weights_info info;
	double worst;

	haccel_weights_info(w, &info);
	*how = "posix_fadvise(DONTNEED)";
	for (uint32_t f = 0; f < info.n_files; f++) {
		int fd = open(haccel_weights_file(w, f), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	worst = residency(w, 1);
	if ((worst < 0 || worst > 0.01) && geteuid() == 0) {
		int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (write(fd, "1", 1) == 1)
				*how = "posix_fadvise(DONTNEED) + drop_caches";
			close(fd);
		}
		worst = residency(w, 1);
	}
	return worst;
}

/* Read the files once, buffered, so warm runs find them cached; returns
 * the least cached file's fraction, or -1 when that cannot be known. */
static double warm_cache(struct haccel_weights *w)
{
	struct haccel_weights_info info;
	char *buf = malloc(8u << 20);

	haccel_weights_info(w, &info);
	for (uint32_t f = 0; buf && f < info.n_files; f++) {
		int fd = open(haccel_weights_file(w, f), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		while (read(fd, buf, 8u << 20) > 0)
			;
		close(fd);
	}
	free(buf);
	return residency(w, 0);
}

/* --- disk ceiling ----------------------------------------------------------- */

struct probe {
	uint32_t qd, bs;
	double bps;
};

/* Sequential O_DIRECT reads at depth qd, blocks of bs, for about `seconds`,
 * starting at *pos (wrapping), so successive probes read fresh regions. */
static double probe_disk(const char *path, uint32_t qd, uint32_t bs, double seconds,
			 uint64_t *pos)
{
	struct io_uring ring;
	struct stat sb;
	void *mem = NULL;
	uint64_t bytes = 0, t0, limit = (uint64_t)(seconds * 1e9), size, next;
	int fd, in_flight = 0;
	double bps = -1;

	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) || (uint64_t)sb.st_size < bs ||
	    posix_memalign(&mem, 4096, (size_t)qd * bs) ||
	    io_uring_queue_init(qd, &ring, 0)) {
		close(fd);
		free(mem);
		return -1;
	}
	size = (uint64_t)sb.st_size / bs * bs;
	next = (*pos / bs * bs) % size;
	t0 = tool_now_ns();
	for (uint32_t i = 0; i < qd; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		io_uring_prep_read(sqe, fd, (char *)mem + (uint64_t)i * bs, bs, next);
		io_uring_sqe_set_data64(sqe, i);
		next = (next + bs) % size;
		in_flight++;
	}
	io_uring_submit(&ring);
	while (in_flight) {
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(&ring, &cqe))
			break;
		uint64_t slot = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		in_flight--;
		if (res < 0)
			goto out;
		bytes += (uint64_t)res;
		if (tool_now_ns() - t0 < limit) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, fd, (char *)mem + slot * bs, bs, next);
			io_uring_sqe_set_data64(sqe, slot);
			next = (next + bs) % size;
			io_uring_submit(&ring);
			in_flight++;
		}
	}
	bps = (double)bytes * 1e9 / (double)(tool_now_ns() - t0);
out:
	*pos = next;
	io_uring_queue_exit(&ring);
	close(fd);
	free(mem);
	return bps;
}

/* --- loaders ---------------------------------------------------------------- */

static double run_mmap_memcpy(struct haccel_weights *w, char *dest)
{
	struct haccel_weights_info info;
	uint64_t t0 = tool_now_ns();

	haccel_weights_info(w, &info);
	for (uint32_t f = 0; f < info.n_files; f++) {
		const char *p = haccel_weights_file(w, f);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		struct stat sb;
		char *m;

		if (fd < 0 || fstat(fd, &sb))
			return -1;
		m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			return -1;
		for (uint32_t i = 0; i < info.n_tensors; i++) {
			struct haccel_tensor_info t;
			haccel_weights_tensor(w, i, &t);
			if (t.file == f)
				memcpy(dest + t.dest_offset, m + t.file_offset, t.bytes);
		}
		munmap(m, (size_t)sb.st_size);
	}
	return (double)info.tensor_bytes * 1e9 / (double)(tool_now_ns() - t0);
}

/* The page-cache copy ceiling of a warm load: threads memcpy pieces of the
 * files' data regions, mapped and faulted in beforehand, into dest. */
struct memcpy_piece {
	const char *src;
	char *dst;
	uint64_t bytes;
};

struct memcpy_job {
	const struct memcpy_piece *piece;
	uint64_t n;
	atomic_uint_fast64_t next;
};

static void *memcpy_worker(void *arg)
{
	struct memcpy_job *j = arg;

	for (uint64_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;)
		memcpy(j->piece[i].dst, j->piece[i].src, j->piece[i].bytes);
	return NULL;
}

/*
 * Bytes per second of `threads` threads copying the checkpoint's tensor
 * bytes from page-cache mappings of its files into dest, in the host layout
 * (each file's data region is contiguous in the file and in dest): what a
 * warm load cannot beat. The mappings are populated before the clock
 * starts. -1 on failure.
 */
static double memory_ceiling(struct haccel_weights *w, char *dest, uint32_t threads)
{
	struct haccel_weights_info info;
	uint64_t piece;
	struct memcpy_piece *pc = NULL;
	struct memcpy_job j;
	pthread_t *th = NULL;
	char **map = NULL;
	uint64_t *map_len = NULL, n = 0, cap = 0, t0, t;
	uint32_t started = 0;
	double bps = -1;

	haccel_weights_info(w, &info);
	/* Pieces small enough that every thread has several to take. */
	piece = info.tensor_bytes / (4ull * threads);
	piece = piece > (16ull << 20) ? 16ull << 20 : piece < (1ull << 20) ? 1ull << 20 : piece;
	map = calloc(info.n_files + 1, sizeof(*map));
	map_len = calloc(info.n_files + 1, sizeof(*map_len));
	th = calloc(threads, sizeof(*th));
	if (!map || !map_len || !th)
		goto out;
	for (uint32_t f = 0; f < info.n_files; f++) {
		uint64_t lo = UINT64_MAX, dlo = 0, bytes = 0;
		struct stat sb;
		int fd;

		for (uint32_t i = 0; i < info.n_tensors; i++) {
			struct haccel_tensor_info ti;

			haccel_weights_tensor(w, i, &ti);
			if (ti.file != f)
				continue;
			if (ti.file_offset < lo) {
				lo = ti.file_offset;
				dlo = ti.dest_offset;
			}
			bytes += ti.bytes;
		}
		if (!bytes)
			continue;
		fd = open(haccel_weights_file(w, f), O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &sb)) {
			if (fd >= 0)
				close(fd);
			goto out;
		}
		map[f] = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
		close(fd);
		if (map[f] == MAP_FAILED) {
			map[f] = NULL;
			goto out;
		}
		map_len[f] = (uint64_t)sb.st_size;
		for (uint64_t o = 0; o < bytes; o += piece) {
			if (n == cap) {
				struct memcpy_piece *np;

				cap = cap ? 2 * cap : 256;
				np = realloc(pc, cap * sizeof(*pc));
				if (!np)
					goto out;
				pc = np;
			}
			pc[n].src = map[f] + lo + o;
			pc[n].dst = dest + dlo + o;
			pc[n].bytes = bytes - o < piece ? bytes - o : piece;
			n++;
		}
	}
	j.piece = pc;
	j.n = n;
	atomic_init(&j.next, 0);
	t0 = tool_now_ns();
	for (uint32_t i = 1; i < threads; i++)
		if (!pthread_create(&th[started], NULL, memcpy_worker, &j))
			started++;
	memcpy_worker(&j);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	t = tool_now_ns() - t0;
	bps = (double)info.tensor_bytes * 1e9 / (double)(t ? t : 1);
out:
	for (uint32_t f = 0; map && f < info.n_files; f++)
		if (map[f])
			munmap(map[f], (size_t)map_len[f]);
	free(map);
	free(map_len);
	free(th);
	free(pc);
	return bps;
}

/* The load flags a run asks for beyond its mode. */
static void load_flags(const struct sopts *o, struct haccel_load_params *p)
{
	/* Depth and read size the user chose apply to every mode. */
	if (o->as_given)
		p->flags |= HACCEL_LOAD_AS_GIVEN;
	if (o->allow_unpinned) {
		p->hostmem_flags |= HACCEL_HOSTMEM_ALLOW_UNPINNED;
		p->flags |= HACCEL_LOAD_ALLOW_UNREGISTERED;
	}
}

static double run_haccel(struct haccel_weights *w, char *dest, uint64_t dest_bytes,
			 const struct sopts *o, uint32_t mode, struct haccel_load_stats *st)
{
	struct haccel_load_params p;
	struct haccel_host_sink sink;
	int ret;

	haccel_load_params_init(&p);
	p.flags = mode | (o->verify ? HACCEL_LOAD_VERIFY : 0);
	load_flags(o, &p);
	p.queue_depth = o->qd;
	p.chunk_bytes = o->chunk;
	p.threads = o->threads;
	haccel_host_sink_init(&sink, dest, dest_bytes);
	ret = haccel_load(w, &p, &sink.sink, st);
	if (ret)
		return ret;
	return (double)st->tensor_bytes * 1e9 / (double)st->ns;
}

/* --- GPU ---------------------------------------------------------------------- */

#define H2D_COPY (64ull << 20)
#define H2D_BUFS 16u            /* a 1 GiB pinned buffer */
#define H2D_PROBE (8ull << 30)  /* bytes per probe */

/* The pinned host-to-device ceiling: the GPU sink's copies of H2D_COPY
 * bytes from a registered buffer, back to back, until H2D_PROBE bytes. */
static double probe_h2d(const struct haccel_sink *s, const char *buf, uint64_t bytes)
{
	uint64_t t0 = tool_now_ns();

	for (uint64_t i = 0; i * H2D_COPY < bytes; i++) {
		uint32_t b = (uint32_t)(i % H2D_BUFS);

		if (s->put(s->user, 0, 0, b * H2D_COPY, buf + b * H2D_COPY, H2D_COPY, b))
			return -1;
	}
	if (s->finish(s->user))
		return -1;
	return (double)bytes * 1e9 / (double)(tool_now_ns() - t0);
}

static double run_gpu(struct haccel_weights *w, const struct haccel_sink *sink,
		      const struct sopts *o, uint32_t mode, struct haccel_load_stats *st)
{
	struct haccel_load_params p;
	int ret;

	haccel_load_params_init(&p);
	p.flags = mode | (o->verify ? HACCEL_LOAD_VERIFY : 0);
	load_flags(o, &p);
	p.queue_depth = o->qd;
	p.chunk_bytes = o->chunk;
	p.threads = o->threads;
	ret = haccel_load(w, &p, sink, st);
	if (ret)
		return ret;
	return (double)st->tensor_bytes * 1e9 / (double)st->ns;
}

/* The GPU side of a run: a sink for the loads and one, with its pinned
 * buffer, for the copy ceiling. */
struct gpu_bench {
	struct haccel_gpu_info info;
	struct haccel_gpu_sink *load, *ceil;
	struct haccel_hostmem *buf;
	char *host;
	int begun, registered;
};

static void gpu_bench_fini(struct gpu_bench *g)
{
	if (g->begun) {
		const struct haccel_sink *s = haccel_gpu_sink_sink(g->ceil);

		s->end(s->user);
	}
	haccel_gpu_sink_destroy(g->ceil);
	haccel_gpu_sink_destroy(g->load);
	haccel_hostmem_free(g->buf);
	memset(g, 0, sizeof(*g));
}

static int gpu_bench_init(struct haccel_ctx *ctx, uint64_t dest_bytes, struct gpu_bench *g)
{
	struct haccel_gpu_sink_params gp;
	struct haccel_hostmem_params hp;
	struct haccel_hostmem_info hi;
	struct haccel_gpu_sink_info si;
	struct haccel_sink_begin b;
	const struct haccel_sink *s;
	char err[1024];
	int ret;

	memset(&hp, 0, sizeof(hp));
	haccel_gpu_sink_params_init(&gp);
	gp.bytes = dest_bytes ? dest_bytes : 1;
	ret = haccel_gpu_sink_create(ctx, &gp, &g->load);
	if (!ret) {
		gp.bytes = (uint64_t)H2D_BUFS * H2D_COPY;
		ret = haccel_gpu_sink_create(ctx, &gp, &g->ceil);
	}
	if (!ret) {
		haccel_hostmem_params_init(&hp);
		hp.bytes = (uint64_t)H2D_BUFS * H2D_COPY;
		/* cuMemHostRegister pins it if mlock may not. */
		hp.flags = HACCEL_HOSTMEM_ALLOW_UNPINNED;
		ret = haccel_hostmem_alloc(ctx, &hp, &g->buf);
	}
	if (!ret) {
		haccel_hostmem_info(g->buf, &hi);
		g->host = hi.ptr;
		/* Something other than zero pages to copy. */
		memset(g->host, 0x5a, hp.bytes);
		memset(&b, 0, sizeof(b));
		b.size = sizeof(b);
		b.n_buf = H2D_BUFS;
		b.staging = g->host;
		b.buf_bytes = H2D_COPY;
		b.dest_bytes = hp.bytes;
		s = haccel_gpu_sink_sink(g->ceil);
		ret = s->begin(s->user, &b);
		g->begun = !ret;
	}
	if (ret) {
		haccel_last_error(ctx, err, sizeof(err));
		tool_err("stream: --device cuda: %s", err[0] ? err : haccel_strerror(ret));
		gpu_bench_fini(g);
		return ret;
	}
	haccel_gpu_sink_info(g->ceil, &si);
	g->registered = si.registered;
	if (!si.registered)
		tool_err("stream: warning: the copy-ceiling buffer is not registered with CUDA (%s): the ceiling is a pageable one",
			 si.fallback_reason);
	/* A first probe wakes the link and the copy engine. */
	probe_h2d(haccel_gpu_sink_sink(g->ceil), g->host, hp.bytes);
	return 0;
}

static json_t *fig(double bps, double ceiling)
{
	json_t *o = json_object();

	json_object_set_new(o, "bytes_per_s", json_real(bps));
	if (ceiling > 0)
		json_object_set_new(o, "fraction_of_ceiling", json_real(bps / ceiling));
	return o;
}

static int parse(int argc, char **argv, struct sopts *o, int *json)
{
	enum { O_CREATE = 256, O_COLD, O_WARM, O_REPEAT, O_PROBE, O_QD, O_CHUNK, O_THREADS, O_VERIFY,
	       O_CEILING, O_DEVICE, O_ALLOW_UNPINNED };
	static const struct option lo[] = {
		{ "create", required_argument, NULL, O_CREATE },
		{ "cold", no_argument, NULL, O_COLD },
		{ "warm", no_argument, NULL, O_WARM },
		{ "repeat", required_argument, NULL, O_REPEAT },
		{ "probe-seconds", required_argument, NULL, O_PROBE },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "chunk", required_argument, NULL, O_CHUNK },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "ceiling", required_argument, NULL, O_CEILING },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "allow-unpinned", no_argument, NULL, O_ALLOW_UNPINNED },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *want = "";
	uint64_t v;
	char *end;
	int c, cold = 0, warm = 0;

	*o = (struct sopts){ .probe_seconds = 1.0, .repeat = 3, .qd = 32,
			     .chunk = 4u << 20, .threads = 8 };
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "jh", lo, NULL)) != -1) {
		switch (c) {
		case O_CREATE:
			want = "a size of at least 4096 bytes, K/M/G/T suffixes";
			if (tool_parse_size(optarg, &o->create) || o->create < 4096)
				goto bad;
			o->create_arg = optarg;
			break;
		case O_COLD:
			cold = 1;
			break;
		case O_WARM:
			warm = 1;
			break;
		case O_REPEAT:
			want = "1..64";
			if (tool_parse_u64(optarg, 1, 64, &v))
				goto bad;
			o->repeat = (unsigned int)v;
			break;
		case O_PROBE:
			want = "seconds, more than 0, at most 60";
			o->probe_seconds = strtod(optarg, &end);
			if (end == optarg || *end ||
			    !(o->probe_seconds > 0 && o->probe_seconds <= 60))
				goto bad;
			break;
		case O_QD:
			want = "1..4096";
			if (tool_parse_u64(optarg, 1, 4096, &v))
				goto bad;
			o->qd = (uint32_t)v;
			o->as_given = 1;
			break;
		case O_CHUNK:
			want = "a multiple of 4096 from 64K to 256M";
			if (tool_parse_size(optarg, &v) || v < (64u << 10) || v > (256u << 20) || v % 4096)
				goto bad;
			o->chunk = (uint32_t)v;
			o->as_given = 1;
			break;
		case O_THREADS:
			want = "1..256";
			if (tool_parse_u64(optarg, 1, 256, &v))
				goto bad;
			o->threads = (uint32_t)v;
			break;
		case O_VERIFY:
			o->verify = 1;
			break;
		case O_CEILING: {
			char qd[32], *comma = strchr(optarg, ',');

			want = "QD,SIZE: a depth of 1..1024, a multiple of 4096 from 4K to 256M";
			if (!comma || (size_t)(comma - optarg) >= sizeof(qd))
				goto bad;
			memcpy(qd, optarg, (size_t)(comma - optarg));
			qd[comma - optarg] = '\0';
			if (tool_parse_u64(qd, 1, 1024, &v))
				goto bad;
			o->ceil_qd = (uint32_t)v;
			if (tool_parse_size(comma + 1, &v) || v < 4096 || v > (256u << 20) || v % 4096)
				goto bad;
			o->ceil_bs = (uint32_t)v;
			break;
		}
		case O_DEVICE:
			want = "host or cuda";
			if (!strcmp(optarg, "cuda"))
				o->cuda = 1;
			else if (strcmp(optarg, "host"))
				goto bad;
			break;
		case O_ALLOW_UNPINNED:
			o->allow_unpinned = 1;
			break;
		case 'j':
			*json = 1;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			tool_option_error("stream", argv, lo);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind + 1 != argc) {
		if (optind + 1 < argc)
			tool_err("stream: unexpected argument '%s' (give exactly one PATH)",
				 argv[optind + 1]);
		else
			tool_err("stream: give exactly one PATH (see haccel-bench stream --help)");
		return -EINVAL;
	}
	o->path = argv[optind];
	o->cold = cold || !warm;
	o->warm = warm || !cold;
	return 0;
bad:
	tool_err("stream: bad value '%s' for --%s (%s)", optarg, tool_option_name(lo, c), want);
	return -EINVAL;
}

/*
 * Cold loads into GPU memory: rounds of (disk ceiling, copy ceiling, load)
 * back to back, each fraction taken within its round. Returns the disk
 * ceiling's median, or -1 when a load failed.
 */
static double cold_gpu(struct haccel_weights *w, const struct sopts *o, struct gpu_bench *g,
		       uint32_t qd, uint32_t bs, uint64_t *pos, int json, json_t *out)
{
	const struct haccel_sink *cs = haccel_gpu_sink_sink(g->ceil);
	double left = 0, ce[64], he[64], gv[64], fd[64], fh[64], fc[64];
	struct haccel_gpu_sink_info si;
	struct haccel_load_stats st;
	uint64_t sink_ns = 0, wait_ns = 0, load_ns = 0;
	const char *how = "";
	char rt[160];
	json_t *c = json_object(), *h;

	for (unsigned int r = 0; r < o->repeat; r++) {
		ce[r] = probe_disk(haccel_weights_file(w, 0), qd, bs, 2 * o->probe_seconds, pos);
		he[r] = probe_h2d(cs, g->host, H2D_PROBE);
		left = worse(left, drop_cache(w, &how));
		gv[r] = run_gpu(w, haccel_gpu_sink_sink(g->load), o, HACCEL_LOAD_DIRECT, &st);
		if (gv[r] < 0 || he[r] < 0) {
			json_decref(c);
			return -1;
		}
		sink_ns += st.sink_ns;
		wait_ns += st.wait_ns;
		load_ns += st.ns;
		fd[r] = gv[r] / ce[r];
		fh[r] = gv[r] / he[r];
		fc[r] = gv[r] / (ce[r] < he[r] ? ce[r] : he[r]);
	}
	double cc = bench_median(ce, o->repeat), hc = bench_median(he, o->repeat);
	double gc = bench_median(gv, o->repeat), f_d = bench_median(fd, o->repeat);
	double f_h = bench_median(fh, o->repeat), f_c = bench_median(fc, o->repeat);
	haccel_gpu_sink_info(g->load, &si);
	json_object_set_new(c, "cache_drop", json_string(how));
	json_object_set_new(c, "cached_after_drop", residency_json(left));
	json_object_set_new(c, "disk_ceiling", json_pack("{s:f,s:i,s:i}", "bytes_per_s", cc,
							  "queue_depth", qd, "block_bytes", bs));
	json_object_set_new(c, "h2d_ceiling", json_pack("{s:f}", "bytes_per_s", hc));
	json_object_set_new(c, "staging_unpinned", json_boolean(st.staging_unpinned));
	json_object_set_new(c, "staging_unregistered", json_boolean(st.staging_unregistered));
	json_object_set_new(c, "haccel", h = fig(gc, 0));
	json_object_set_new(h, "fraction_of_ceiling", json_real(f_c));
	json_object_set_new(h, "fraction_of_disk_ceiling", json_real(f_d));
	json_object_set_new(h, "fraction_of_h2d_ceiling", json_real(f_h));
	json_object_set_new(c, "io_path", json_string(st.io_path == HACCEL_IO_URING ? "io_uring" : "pread"));
	json_object_set_new(c, "staging_registered", json_boolean(si.registered));
	json_object_set_new(c, "sink_share", json_real((double)sink_ns / (double)load_ns));
	json_object_set_new(c, "wait_share", json_real((double)wait_ns / (double)load_ns));
	json_object_set_new(out, "cold", c);
	if (!json)
		printf("\ncold, into GPU memory (page cache dropped by %s; %s)\n"
		       "  disk ceiling      %7.3f GB/s  (depth %u, %u MiB blocks, beside each run)\n"
		       "  host->GPU ceiling %7.3f GB/s  (%s, 64 MiB copies, beside each run)\n"
		       "  haccel -> GPU     %7.3f GB/s  %5.1f%% of the smaller ceiling (target >= 95%%): %.1f%% of disk, %.1f%% of host->GPU\n"
		       "                    [%s, O_DIRECT, depth %u, %u KiB reads, staging %s]\n"
		       "  (loader thread: %.0f%% waiting for reads, %.0f%% handing chunks to the GPU sink)\n",
		       how, residency_text(left, "still cached at worst", rt, sizeof(rt)),
		       cc / 1e9, qd, bs >> 20, hc / 1e9,
		       g->registered ? "pinned" : "PAGEABLE", gc / 1e9, 100 * f_c, 100 * f_d, 100 * f_h,
		       st.io_path == HACCEL_IO_URING ? "io_uring" : "pread pool", o->qd, o->chunk >> 10,
		       si.registered ? "registered" : "NOT registered",
		       100.0 * (double)wait_ns / (double)load_ns, 100.0 * (double)sink_ns / (double)load_ns);
	return cc;
}

/* Warm loads into GPU memory beside the copy ceiling. 0 or -1. */
static int warm_gpu(struct haccel_weights *w, const struct sopts *o, struct gpu_bench *g,
		    int json, json_t *out)
{
	const struct haccel_sink *cs = haccel_gpu_sink_sink(g->ceil);
	double cached = warm_cache(w), he[64], gv[64], fh[64];
	char rt[160], depth[64];
	struct haccel_gpu_sink_info si;
	struct haccel_load_stats st;
	json_t *c = json_object(), *h;

	for (unsigned int r = 0; r < o->repeat; r++) {
		he[r] = probe_h2d(cs, g->host, H2D_PROBE);
		gv[r] = run_gpu(w, haccel_gpu_sink_sink(g->load), o, HACCEL_LOAD_BUFFERED, &st);
		if (gv[r] < 0 || he[r] < 0) {
			json_decref(c);
			return -1;
		}
		fh[r] = gv[r] / he[r];
	}
	double hc = bench_median(he, o->repeat), gc = bench_median(gv, o->repeat);
	double f_h = bench_median(fh, o->repeat);
	haccel_gpu_sink_info(g->load, &si);
	json_object_set_new(c, "cached_before", residency_json(cached));
	json_object_set_new(c, "h2d_ceiling", json_pack("{s:f}", "bytes_per_s", hc));
	json_object_set_new(c, "haccel", h = fig(gc, 0));
	json_object_set_new(h, "fraction_of_ceiling", json_real(f_h));
	json_object_set_new(c, "io_path", json_string(st.io_path == HACCEL_IO_URING ? "io_uring" : "pread"));
	json_object_set_new(c, "staging_registered", json_boolean(si.registered));
	json_object_set_new(c, "reads_as_given", json_boolean(o->as_given));
	json_object_set_new(out, "warm", c);
	/* Without --chunk or --queue-depth the loader caps buffered staged
	 * reads as haccel.h documents (HACCEL_LOAD_AS_GIVEN). */
	uint32_t ch = o->chunk, qd = o->qd;
	if (!o->as_given) {
		uint32_t most;

		ch = ch < HACCEL_LOAD_STAGED_CHUNK ? ch : HACCEL_LOAD_STAGED_CHUNK;
		most = HACCEL_LOAD_STAGED_INFLIGHT / ch;
		most = most > 8 ? most : 8;
		qd = qd < most ? qd : most;
	}
	snprintf(depth, sizeof(depth), "%u KiB reads, depth %u%s", ch >> 10, qd,
		 o->as_given ? " as given" : "");
	if (!json)
		printf("\nwarm, into GPU memory (%s)\n"
		       "  host->GPU ceiling %7.3f GB/s  (%s, 64 MiB copies, beside each run)\n"
		       "  haccel -> GPU     %7.3f GB/s  %5.1f%% of the host->GPU ceiling  [%s, buffered, %s, staging %s]\n",
		       residency_text(cached, "of the files in the page cache", rt, sizeof(rt)),
		       hc / 1e9, g->registered ? "pinned" : "PAGEABLE", gc / 1e9, 100 * f_h,
		       st.io_path == HACCEL_IO_URING ? "io_uring" : "pread pool", depth,
		       si.registered ? "registered" : "NOT registered");
	return 0;
}

int bench_stream(int argc, char **argv, int json)
{
	static const uint32_t qds[] = { 1, 4, 16, 32, 64 };
	static const uint32_t bss[] = { 1u << 20, 4u << 20, 16u << 20 };
	struct haccel_weights_info info;
	struct haccel_weights *w = NULL;
	struct haccel_ctx *ctx = NULL;
	struct haccel_load_stats st;
	struct sopts o;
	json_t *out = json_object(), *probes = json_array();
	double ceiling = 0;
	/* Without a sweep, the ceiling comes from the cold rounds alone. */
	uint32_t best_qd = 0, best_bs = 0;
	uint64_t pos = 0;
	struct gpu_bench g;
	char *dest = NULL;
	char err[1024];
	int ret;

	memset(&g, 0, sizeof(g));
	ret = parse(argc, argv, &o, &json);
	if (ret) {
		json_decref(out);
		json_decref(probes);
		return ret > 0 ? EXIT_OK : EXIT_USAGE;
	}
	/* Lines reach a pipe as they are printed (the JSON comes at the end). */
	if (!json)
		setvbuf(stdout, NULL, _IOLBF, 0);
	/* Each failure is reported once, with haccel_last_error(). */
	ret = tool_ctx_open(-1, &ctx);
	if (ret) {
		tool_err("stream: %s", haccel_strerror(ret));
		return EXIT_FAIL;
	}
	/* No GPU: say so before writing or reading anything. */
	if (o.cuda && haccel_gpu_info(ctx, &g.info)) {
		tool_err("stream: --device cuda: %s%s", haccel__cuda_why_prefix(g.info.reason), g.info.reason);
		haccel_close(ctx);
		return EXIT_FAIL;
	}
	if (o.create && create_checkpoint(o.path, o.create_arg, o.create)) {
		haccel_close(ctx);
		return EXIT_FAIL;
	}
	ret = haccel_weights_open(ctx, o.path, 0, &w);
	if (ret) {
		/* The library's message names the file. */
		if (!haccel_last_error(ctx, err, sizeof(err)))
			snprintf(err, sizeof(err), "%s: %s", o.path, haccel_strerror(ret));
		tool_weights_error(o.path, err, sizeof(err));
		tool_err("stream: %s", err);
		haccel_close(ctx);
		return EXIT_FAIL;
	}
	haccel_weights_info(w, &info);
	if (o.cuda) {
		if (gpu_bench_init(ctx, info.dest_bytes, &g)) {
			haccel_weights_close(w);
			haccel_close(ctx);
			return EXIT_FAIL;
		}
	} else {
		dest = mmap(NULL, info.dest_bytes ? info.dest_bytes : 1, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (dest == MAP_FAILED) {
			tool_err("stream: cannot allocate %llu bytes of destination", (unsigned long long)info.dest_bytes);
			return EXIT_FAIL;
		}
	}
	json_object_set_new(out, "benchmark", json_string("stream"));
	json_object_set_new(out, "device", json_string(o.cuda ? "cuda" : "host"));
	if (o.cuda) {
		json_object_set_new(out, "gpu", json_pack("{s:s,s:s}", "name", g.info.name,
							  "pci_bus_id", g.info.pci_bus_id));
		json_object_set_new(out, "h2d_ceiling_method",
				    json_pack("{s:I,s:I,s:b}", "copy_bytes", (json_int_t)H2D_COPY,
					      "buffer_bytes", (json_int_t)(H2D_BUFS * H2D_COPY),
					      "registered", g.registered));
	}
	json_object_set_new(out, "path", json_string(o.path));
	json_object_set_new(out, "files", json_integer(info.n_files));
	json_object_set_new(out, "tensors", json_integer(info.n_tensors));
	json_object_set_new(out, "tensor_bytes", json_integer((json_int_t)info.tensor_bytes));
	if (!json)
		printf("haccel-bench stream: %s: %u file(s), %u tensors, %.2f GB; medians of %u runs\n\n",
		       o.path, info.n_files, info.n_tensors, info.tensor_bytes / 1e9, o.repeat);
	if (!json && o.cuda)
		printf("GPU: %s at %s; host->GPU ceiling: 64 MiB copies from a 1 GiB %s buffer\n\n",
		       g.info.name, g.info.pci_bus_id, g.registered ? "registered" : "PAGEABLE (registration refused)");

	/* The disk ceiling, on the first file (the largest one when sharded
	 * files differ little). */
	if (!json && o.cold && !o.ceil_qd)
		printf("disk ceiling: O_DIRECT sequential reads, io_uring, 2 probes of %.1f s each\n  %6s %8s %10s\n",
		       o.probe_seconds, "depth", "block", "GB/s");
	if (o.ceil_qd) {
		best_qd = o.ceil_qd;
		best_bs = o.ceil_bs;
	}
	/*
	 * Two passes over the grid, each probe reading a fresh region of the
	 * file, and each configuration judged by its mean: a single probe can
	 * hit data the disk's host still caches (a file just written) and
	 * would crown an outlier.
	 */
	double pass1[sizeof(qds) / sizeof(qds[0])][sizeof(bss) / sizeof(bss[0])];
	for (int pass = 0; o.cold && !o.ceil_qd && pass < 2; pass++) {
		for (unsigned int i = 0; i < sizeof(qds) / sizeof(qds[0]); i++)
			for (unsigned int k = 0; k < sizeof(bss) / sizeof(bss[0]); k++) {
				double b = probe_disk(haccel_weights_file(w, 0), qds[i], bss[k],
						      o.probe_seconds, &pos);
				json_t *pj;

				if (!pass) {
					pass1[i][k] = b;
					continue;
				}
				json_object_set_new(pj = json_object(), "first_pass_bytes_per_s",
						    json_real(pass1[i][k]));
				json_object_set_new(pj, "second_pass_bytes_per_s", json_real(b));
				b = (b + pass1[i][k]) / 2;

				json_object_set_new(pj, "queue_depth", json_integer(qds[i]));
				json_object_set_new(pj, "block_bytes", json_integer(bss[k]));
				json_object_set_new(pj, "bytes_per_s", json_real(b));
				json_array_append_new(probes, pj);
				if (!json)
					printf("  %6u %6u M %10.3f\n", qds[i], bss[k] >> 20, b / 1e9);
				if (b > ceiling) {
					ceiling = b;
					best_qd = qds[i];
					best_bs = bss[k];
				}
			}
	}
	/* A warm run alone has no disk ceiling: it is bound by memory. */
	if (o.cold)
		json_object_set_new(out, "ceiling_probes", probes);
	else
		json_decref(probes);
	if (!json && o.cold && !o.ceil_qd)
		printf("  best: depth %u, %u MiB blocks; re-measured beside each cold run below\n",
		       best_qd, best_bs >> 20);

	if (o.cold && o.cuda) {
		double cc = cold_gpu(w, &o, &g, best_qd, best_bs, &pos, json, out);

		if (cc < 0)
			goto load_failed;
		if (cc > ceiling)
			ceiling = cc;
	} else if (o.cold) {
		const char *how;
		double left = 0, hc, mc, cc, hf, mf, ce[64], hv[64], mv[64], hfr[64], mfr[64];
		uint64_t sink_ns = 0, wait_ns = 0, load_ns = 0;
		json_t *c = json_object();
		char rt[160];

		/*
		 * Rounds of (ceiling, haccel, mmap + memcpy), back to back, so a
		 * disk whose speed drifts moves all three alike; each fraction is
		 * taken within its round.
		 */
		for (unsigned int r = 0; r < o.repeat; r++) {
			ce[r] = probe_disk(haccel_weights_file(w, 0), best_qd, best_bs,
					   2 * o.probe_seconds, &pos);
			left = worse(left, drop_cache(w, &how));
			hv[r] = run_haccel(w, dest, info.dest_bytes, &o, HACCEL_LOAD_DIRECT, &st);
			if (hv[r] < 0)
				goto load_failed;
			sink_ns += st.sink_ns;
			wait_ns += st.wait_ns;
			load_ns += st.ns;
			left = worse(left, drop_cache(w, &how));
			mv[r] = run_mmap_memcpy(w, dest);
			hfr[r] = hv[r] / ce[r];
			mfr[r] = mv[r] / ce[r];
		}
		cc = bench_median(ce, o.repeat);
		hc = bench_median(hv, o.repeat);
		mc = bench_median(mv, o.repeat);
		hf = bench_median(hfr, o.repeat);
		mf = bench_median(mfr, o.repeat);
		if (cc > ceiling)
			ceiling = cc;
		json_object_set_new(c, "cache_drop", json_string(how));
		json_object_set_new(c, "cached_after_drop", residency_json(left));
		json_object_set_new(c, "disk_ceiling", json_pack("{s:f,s:i,s:i}", "bytes_per_s", cc,
								  "queue_depth", best_qd, "block_bytes", best_bs));
		json_object_set_new(c, "haccel", fig(hc, 0));
		json_object_set_new(json_object_get(c, "haccel"), "fraction_of_ceiling", json_real(hf));
		json_object_set_new(c, "mmap_memcpy", fig(mc, 0));
		json_object_set_new(json_object_get(c, "mmap_memcpy"), "fraction_of_ceiling", json_real(mf));
		json_object_set_new(c, "io_path", json_string(st.io_path == HACCEL_IO_URING ? "io_uring" : "pread"));
		json_object_set_new(c, "direct", json_boolean(st.direct));
		json_object_set_new(c, "staging_unpinned", json_boolean(st.staging_unpinned));
		json_object_set_new(c, "staging_unregistered", json_boolean(st.staging_unregistered));
		json_object_set_new(c, "sink_share", json_real((double)sink_ns / (double)load_ns));
		json_object_set_new(c, "wait_share", json_real((double)wait_ns / (double)load_ns));
		json_object_set_new(out, "cold", c);
		if (!json)
			printf("\ncold (page cache dropped by %s; %s)\n"
			       "  disk ceiling    %7.3f GB/s  (depth %u, %u MiB blocks, beside each run)\n"
			       "  haccel loader   %7.3f GB/s  %5.1f%% of the disk ceiling (target >= 95%%)  [%s, O_DIRECT, depth %u, %u KiB reads]\n"
			       "  mmap + memcpy   %7.3f GB/s  %5.1f%% of the disk ceiling\n"
			       "  (loader thread: %.0f%% waiting for reads, %.0f%% copying to the destination)\n",
			       how, residency_text(left, "still cached at worst", rt, sizeof(rt)),
			       cc / 1e9, best_qd, best_bs >> 20,
			       hc / 1e9, 100 * hf,
			       st.io_path == HACCEL_IO_URING ? "io_uring" : "pread pool", o.qd, o.chunk >> 10,
			       mc / 1e9, 100 * mf, 100.0 * (double)wait_ns / (double)load_ns,
			       100.0 * (double)sink_ns / (double)load_ns);
	}
	if (o.cold)
		json_object_set_new(out, "disk_ceiling", json_pack("{s:f,s:i,s:i}", "bytes_per_s", ceiling,
								    "queue_depth", best_qd, "block_bytes", best_bs));
	if (o.warm && o.cuda) {
		if (warm_gpu(w, &o, &g, json, out))
			goto load_failed;
	} else if (o.warm) {
		double cached = warm_cache(w), mc, hw, mw, hf, mf, cv[64], hv[64], mv[64], hfr[64], mfr[64];
		json_t *c = json_object(), *f;
		char rt[160];

		/*
		 * Rounds of (memory ceiling, haccel, mmap + memcpy), back to back,
		 * each fraction taken within its round, as for cold runs.
		 */
		for (unsigned int r = 0; r < o.repeat; r++) {
			cv[r] = memory_ceiling(w, dest, o.threads);
			if (cv[r] <= 0) {
				tool_err("stream: cannot map the files for the memory ceiling");
				goto failed;
			}
			hv[r] = run_haccel(w, dest, info.dest_bytes, &o, HACCEL_LOAD_BUFFERED, &st);
			if (hv[r] < 0)
				goto load_failed;
			mv[r] = run_mmap_memcpy(w, dest);
			hfr[r] = hv[r] / cv[r];
			mfr[r] = mv[r] / cv[r];
		}
		mc = bench_median(cv, o.repeat);
		hw = bench_median(hv, o.repeat);
		mw = bench_median(mv, o.repeat);
		hf = bench_median(hfr, o.repeat);
		mf = bench_median(mfr, o.repeat);
		json_object_set_new(c, "cached_before", residency_json(cached));
		json_object_set_new(c, "memory_ceiling",
				    json_pack("{s:f,s:i,s:s}", "bytes_per_s", mc, "threads", o.threads,
					      "method", "memcpy from populated page-cache mappings of the files into the destination"));
		json_object_set_new(c, "haccel", f = fig(hw, 0));
		json_object_set_new(f, "fraction_of_ceiling", json_real(hf));
		json_object_set_new(c, "mmap_memcpy", f = fig(mw, 0));
		json_object_set_new(f, "fraction_of_ceiling", json_real(mf));
		json_object_set_new(c, "speedup_over_mmap", json_real(hw / mw));
		json_object_set_new(c, "io_path", json_string(st.io_path == HACCEL_IO_URING ? "io_uring" : "pread"));
		json_object_set_new(c, "direct", json_boolean(st.direct));
		json_object_set_new(out, "warm", c);
		if (!json)
			printf("%swarm (%s)\n"
			       "  memory ceiling  %7.3f GB/s  (%u thread%s copying from the page cache, beside each run)\n"
			       "  haccel loader   %7.3f GB/s  %5.1f%% of the memory ceiling; %.2fx mmap + memcpy (target >= 3x)  [%s, %s, %u threads]\n"
			       "  mmap + memcpy   %7.3f GB/s  %5.1f%% of the memory ceiling\n",
			       o.cold ? "\n" : "",
			       residency_text(cached, "of the files in the page cache", rt, sizeof(rt)),
			       mc / 1e9, o.threads, o.threads == 1 ? "" : "s", hw / 1e9, 100 * hf, hw / mw,
			       st.io_path == HACCEL_IO_URING ? "io_uring" : "pread pool",
			       st.direct ? "O_DIRECT" : "buffered", o.threads, mw / 1e9, 100 * mf);
	}
	if (dest)
		munmap(dest, info.dest_bytes ? info.dest_bytes : 1);
	gpu_bench_fini(&g);
	haccel_weights_close(w);
	haccel_close(ctx);
	if (json)
		return tool_print_json(out) ? EXIT_FAIL : EXIT_OK;
	json_decref(out);
	return EXIT_OK;

load_failed:
	haccel_last_error(ctx, err, sizeof(err));
	tool_unpinned_hint(err, sizeof(err), o.allow_unpinned, "loads");
	tool_err("stream: load failed: %s", err);
failed:
	gpu_bench_fini(&g);
	if (dest)
		munmap(dest, info.dest_bytes ? info.dest_bytes : 1);
	haccel_weights_close(w);
	haccel_close(ctx);
	json_decref(out);
	return EXIT_FAIL;
}
