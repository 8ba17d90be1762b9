// SPDX-License-Identifier: MIT
/*
 * The weight loader: every tensor of a checkpoint into a sink.
 *
 * Plan. Each file's data region (all tensors, no holes: the parser proved
 * it) is cut into chunks of chunk_bytes, read in file order. Tensors are not
 * aligned to anything, so in O_DIRECT mode a chunk is widened to the file's
 * direct-I/O alignment (statx STATX_DIOALIGN) and the bytes outside the data
 * region are read and ignored.
 *
 * Two modes:
 *  - staging: reads land in pinned, NUMA-local staging buffers (registered
 *    with io_uring as fixed buffers); completed chunks are handed to the sink
 *    strictly in file order, piece by piece per tensor, which also lets the
 *    checksum of each tensor be computed in one streaming pass. A buffer is
 *    reused only after sink->wait(buf): a GPU sink copies asynchronously.
 *    Used for O_DIRECT (cold files) and for sinks without a host layout.
 *    A sink with begin() learns where the buffers are before the first
 *    put (a GPU sink registers them with the driver) and gets end() after
 *    the last put, wait and finish, before they are freed.
 *  - direct-to-destination: a buffered load into a host sink (the file is
 *    in the page cache) reads straight into the destination, many reads in
 *    flight, each done by a kernel worker (IOSQE_ASYNC) or a pool thread, so
 *    the page-cache copies run on several cores; checksums are computed
 *    afterwards, in parallel, over the destination.
 *
 * Mode choice. Automatic mode reads direct unless 90% of the data is in
 * the page cache. Residency comes from cachestat(2); where that is
 * missing (before Linux 6.5) or refused (newer kernels apply mincore's
 * rule to it), from mincore(2), but only for a file this process may
 * write: for any other file the kernel makes mincore report every page
 * resident, which would send a cold checkpoint through buffered reads.
 * Unknown residency means direct reads.
 *
 * I/O goes through io_uring (liburing); where the kernel refuses it
 * (ENOSYS, EPERM: kernel.io_uring_disabled, seccomp) or HACCEL_FORCE_PREAD=1
 * asks, a pool of pread threads does the same reads, and one warning says
 * why. Short reads are continued, EINTR/EAGAIN retried (io_uring_enter's
 * EINTR, EAGAIN and EBUSY too); end of file before the data's end means the
 * file was truncated. Each file is checked against what
 * haccel_weights_open() saw (size, mtime, device, inode) before and after
 * the load, and so is the O_DIRECT descriptor, opened by path a second
 * time, so a file changed or replaced underneath is an error, never
 * garbage. After an error every read in flight completes before
 * haccel_load() returns (drain()).
 *
 * Nothing falls back silently: staging that cannot be locked or registered
 * with io_uring fails the load unless the caller allowed that fallback,
 * and an allowed one is logged at warn level and counted in the stats.
 *
 * Test knobs (environment, read at each load; for tests and diagnosis):
 * HACCEL_TEST_SHORT_READS=1 makes the first read of every chunk ask for
 * about half of it (aligned in direct mode), so every chunk is continued
 * after a short read; HACCEL_TEST_EAGAIN=1 makes the first attempt of every
 * even-numbered chunk complete with -EAGAIN (io_uring: a no-op in its
 * place; pool: no pread), so every such chunk is retried.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#endif

#include "core/ctx.h"
#include "core/log.h"
#include "core/util.h"
#include "hostmem/hostmem.h"
#include "stream.h"
#include "weights.h"

/* A chunk is read (INFLIGHT until DONE), then, with copy threads, handed
 * to them (COPYING). */
enum chunk_state { CH_PENDING = 0, CH_INFLIGHT, CH_DONE, CH_COPYING };

struct chunk {
	uint32_t file;
	int32_t buf;           /* staging buffer, -1 when reading to the destination */
	uint64_t off;          /* file offset of the read */
	uint64_t len;          /* bytes asked for */
	uint64_t want_end;     /* the read is complete once it covers this offset */
	uint64_t done;         /* bytes read so far */
	char *dst;             /* where the read lands */
	int state;
	int err;               /* pool reader's result */
	bool faked;            /* HACCEL_TEST_EAGAIN: its -EAGAIN was injected */
	uint32_t short_reads;  /* pread_rest's counts, not yet in the stats */
	uint32_t retries;
};

/* user_data bit of a no-op standing in for a read (HACCEL_TEST_EAGAIN). */
#define FAKE_EAGAIN (1ull << 63)

struct pool_reader {
	pthread_t *threads;
	uint32_t n_threads;
	pthread_mutex_t lock;
	pthread_cond_t work_cv, done_cv;
	uint64_t *work, *done;   /* ring buffers of chunk indices */
	uint64_t work_head, work_tail, done_head, done_tail, cap;
	bool stop;
};

struct loader {
	struct haccel_ctx *ctx;
	struct haccel_weights *w;
	struct haccel_load_params p;
	const struct haccel_sink *sink; /* &sink_copy */
	struct haccel_sink sink_copy;   /* the caller's, as far as its size says */
	bool begun;                     /* sink->begin() returned 0: end() owed */
	struct haccel_load_stats st;

	bool direct;             /* O_DIRECT */
	bool to_dest;            /* read straight into sink->direct_base */
	bool verify;
	int *fd;                 /* per file: the descriptor reads use */
	int *fd_buffered;        /* per file: for a direct-I/O remainder that is
				  * no longer aligned (-1 when fd is buffered) */
	uint32_t off_align;

	struct chunk *ch;
	uint64_t n_ch, next_submit, next_consume, in_flight;

	struct haccel_hostmem *staging;
	char *stage;
	uint32_t n_buf;
	/*
	 * Free staging buffers, a ring of n_free entries from free_head.
	 * Synchronous sinks reuse the buffer freed last (LIFO, warm in cache);
	 * asynchronous ones (fifo: the sink has wait()) the one freed longest
	 * ago, whose copy out is the likeliest to be done, so wait() rarely
	 * blocks. With copy threads, under copy_lock.
	 */
	uint32_t *free_buf, n_free, free_head;
	bool fifo;

	bool use_uring, fixed;
	struct io_uring ring;
	struct pool_reader pool;

	/* staging-mode delivery: per file, the next tensor to receive bytes */
	uint32_t *cursor;
	XXH3_state_t *xs;

	/*
	 * Host sink through staging: completed chunks are copied to the
	 * destination by copy threads, in any order, so the I/O thread only
	 * does I/O. free_buf/n_free and the queue are then under copy_lock.
	 */
	bool copy_pool;
	pthread_t *copiers;
	uint32_t n_copiers;
	pthread_mutex_t copy_lock;
	pthread_cond_t copy_cv, freed_cv;
	uint64_t *copy_q, copy_head, copy_tail, copied;
	bool copy_stop;

	uint64_t t0, last_progress;
	bool progress;
	bool test_short, test_eagain; /* HACCEL_TEST_SHORT_READS, _EAGAIN */
	atomic_bool bind_warned;      /* a worker's node binding failed */
	bool stranded;                /* reads the kernel holds could not be
				       * waited for: staging is never freed */
	int err;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void haccel_load_params_init(struct haccel_load_params *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->queue_depth = 32;
	p->chunk_bytes = 4u << 20;
	p->threads = 8;
	p->node = HACCEL_NODE_ANY;
}

/* ------------------------------------------------------------------------ */
/* Host sink                                                                */

static int host_put(void *user, uint32_t tensor, uint64_t tensor_offset,
		    uint64_t dest_offset, const void *src, uint64_t bytes,
		    uint32_t buf)
{
	struct haccel_host_sink *s = user;

	(void)tensor;
	(void)tensor_offset;
	(void)buf;
	if (dest_offset > s->bytes || bytes > s->bytes - dest_offset)
		return -ERANGE;
	memcpy((char *)s->base + dest_offset, src, bytes);
	return 0;
}

void haccel_host_sink_init(struct haccel_host_sink *s, void *base, uint64_t bytes)
{
	if (!s)
		return;
	memset(s, 0, sizeof(*s));
	s->base = base;
	s->bytes = bytes;
	s->sink.user = s;
	s->sink.put = host_put;
	s->sink.direct_base = base;
	s->sink.direct_bytes = bytes;
	s->sink.size = sizeof(s->sink);
}

/* A copy of the caller's sink: fields its size does not cover stay zero
 * (see struct haccel_sink, "ABI"). Returns 0 or -EINVAL. */
static int sink_copy(struct haccel_ctx *ctx, const struct haccel_sink *s,
		     struct haccel_sink *out)
{
	const size_t fixed = offsetof(struct haccel_sink, begin);
	size_t size = s->size;

	memset(out, 0, sizeof(*out));
	if (!size) {
		size = fixed;
	} else if (size < fixed) {
		return haccel__fail(ctx, -EINVAL, "load: sink size %zu is smaller than the smallest known (%zu)",
				    size, fixed);
	} else if (size > sizeof(*out)) {
		for (size_t i = sizeof(*out); i < size; i++)
			if (((const unsigned char *)s)[i])
				return haccel__fail(ctx, -EINVAL, "load: sink of %zu bytes sets fields this library (%zu bytes) does not know",
						    size, sizeof(*out));
		size = sizeof(*out);
	}
	memcpy(out, s, size);
	if (out->flags)
		return haccel__fail(ctx, -EINVAL, "load: unknown sink flags 0x%x", out->flags);
	return 0;
}

/*
 * A sink callback failed with ret: report "<what>: <reason>", the reason
 * being the sink's own message when it stored one since errs (the
 * library's sinks do: a CUDA error, a destination too small), else the
 * status.
 */
static int sink_fail(struct loader *L, int ret, uint64_t errs, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int sink_fail(struct loader *L, int ret, uint64_t errs, const char *fmt, ...)
{
	char what[512], why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* The sink said why in this thread (the one that called it), or
	 * not: another thread's failure on the context is not its reason. */
	if (haccel__thread_errors() == errs || !haccel__thread_last_error(L->ctx, why, sizeof(why)))
		snprintf(why, sizeof(why), "%s", strerror(-ret));
	return haccel__fail(L->ctx, ret, "%s: %s", what, why);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */

/* Is file f still the one haccel_weights_open() parsed? */
static int check_unchanged(struct loader *L, uint32_t f, int fd, const char *when)
{
	const struct haccel__wfile *wf = &L->w->files[f];
	struct stat sb;

	if (fstat(fd, &sb))
		return haccel__fail(L->ctx, -errno, "%s: fstat: %s", wf->path, strerror(errno));
	if (sb.st_dev != wf->dev || sb.st_ino != wf->ino)
		return haccel__fail(L->ctx, -EBADMSG,
				    "%s: file changed %s (replaced: another file, inode %llu, is at its path now; was inode %llu when opened): reopen the checkpoint",
				    wf->path, when, (unsigned long long)sb.st_ino,
				    (unsigned long long)wf->ino);
	if ((uint64_t)sb.st_size != wf->size || sb.st_mtim.tv_sec != wf->mtime.tv_sec ||
	    sb.st_mtim.tv_nsec != wf->mtime.tv_nsec)
		return haccel__fail(L->ctx, -EBADMSG,
				    "%s: file changed %s (size %llu, was %llu when opened; or modified since): reopen the checkpoint",
				    wf->path, when, (unsigned long long)sb.st_size,
				    (unsigned long long)wf->size);
	return 0;
}

/* Out of memory in the load: say for what, as every other failure does. */
static int oom(struct loader *L, const char *what)
{
	return haccel__fail(L->ctx, -ENOMEM, "load: out of memory for %s", what);
}

/*
 * cachestat(2) (Linux 6.5): the kernel's struct, defined here because
 * older headers lack it; the syscall has the same number on every
 * architecture of the generic table.
 */
#if !defined(__NR_cachestat) &&                                             \
	(defined(__x86_64__) || defined(__aarch64__) || defined(__i386__) || \
	 (defined(__riscv) && __riscv_xlen == 64))
#define __NR_cachestat 451
#endif

struct cachestat_range {
	uint64_t off, len;      /* len 0: to the end of the file */
};

struct cachestat_counts {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Pages of fd in the page cache, through cachestat(2). 0 or -errno
 * (-ENOSYS: no such syscall; -EPERM: refused, as mincore would lie). */
static int file_cached_pages(int fd, uint64_t *pages)
{
#ifdef __NR_cachestat
	struct cachestat_range r = { 0, 0 };
	struct cachestat_counts cs;

	memset(&cs, 0, sizeof(cs));
	if (syscall(__NR_cachestat, (unsigned int)fd, &r, &cs, 0u))
		return -errno;
	*pages = cs.nr_cache;
	return 0;
#else
	(void)fd;
	(void)pages;
	return -ENOSYS;
#endif
}

/*
 * Does mincore() tell the truth about fd's pages? Since Linux 5.0 it does
 * only for a file the caller owns (or has CAP_FOWNER over) or may write;
 * for any other file it reports every page resident.
 */
static bool mincore_truthful(int fd, const char *path)
{
	struct stat sb;

	if (geteuid() == 0)
		return true;
	if (fstat(fd, &sb) == 0 && sb.st_uid == geteuid())
		return true;
	return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

/* Resident pages of fd through mincore() over windowed mappings. */
static uint64_t mincore_pages(int fd, uint64_t size, unsigned char *vec, long pg)
{
	const uint64_t window = 1ull << 30;
	uint64_t resident = 0;

	for (uint64_t off = 0; off < size; off += window) {
		uint64_t len = size - off < window ? size - off : window;
		void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);

		if (m == MAP_FAILED)
			continue; /* counted as not cached: direct reads are safe */
		uint64_t pages = (len + (uint64_t)pg - 1) / (uint64_t)pg;
		if (mincore(m, len, vec) == 0)
			for (uint64_t i = 0; i < pages; i++)
				resident += vec[i] & 1;
		munmap(m, len);
	}
	return resident;
}

int haccel__file_resident_pages(int fd, const char *path, uint64_t size, uint64_t *resident,
				uint64_t *pages, char *why, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *vec;
	uint64_t n = 0;
	int ret;

	if (pg <= 0)
		pg = 4096;
	*pages = (size + (uint64_t)pg - 1) / (uint64_t)pg;
	ret = file_cached_pages(fd, &n);
	if (ret == 0) {
		*resident = n < *pages ? n : *pages;
		return 0;
	}
	if (!mincore_truthful(fd, path)) {
		snprintf(why, len, "%s: cachestat: %s, and mincore reports every page of a file this process may not write as cached",
			 path, strerror(-ret));
		return -1;
	}
	vec = malloc((1ull << 30) / (uint64_t)pg);
	if (!vec) {
		snprintf(why, len, "out of memory for mincore");
		return -1;
	}
	*resident = mincore_pages(fd, size, vec, pg);
	free(vec);
	return 0;
}

/*
 * Fraction of the files' pages in the page cache (0..1), or -1 when it
 * cannot be known; then why (len bytes) says why.
 */
static double cached_fraction(struct loader *L, char *why, size_t len)
{
	uint64_t resident = 0, total = 0;

	for (uint32_t f = 0; f < L->w->n_files; f++) {
		const struct haccel__wfile *wf = &L->w->files[f];
		uint64_t r, pages;

		if (haccel__file_resident_pages(L->fd[f], wf->path, wf->size, &r, &pages, why, len))
			return -1;
		resident += r;
		total += pages;
	}
	return total ? (double)resident / (double)total : 1.0;
}

/* Safe on every state open_files() can leave: arrays NULL or all -1 but
 * for the descriptors opened. */
static void close_files(struct loader *L)
{
	for (uint32_t f = 0; f < L->w->n_files; f++) {
		if (L->fd && L->fd[f] >= 0)
			close(L->fd[f]);
		if (L->fd_buffered && L->fd_buffered[f] >= 0)
			close(L->fd_buffered[f]);
	}
	free(L->fd);
	free(L->fd_buffered);
	L->fd = L->fd_buffered = NULL;
}

static void close_all(int *fds, uint32_t n)
{
	for (uint32_t f = 0; f < n; f++)
		if (fds[f] >= 0)
			close(fds[f]);
	free(fds);
}

/*
 * Reopen every file with O_DIRECT: all of them, or none. A file that has
 * no direct I/O (some FUSE filesystems, tmpfs before Linux 6.6, an
 * alignment too large for the staging buffers) sends the whole load to
 * buffered reads, with one warning; a descriptor is swapped only once
 * every file has one. Each O_DIRECT descriptor is opened by path, so it
 * is checked to be the file the buffered one holds (a rename over the
 * path in between would otherwise load the new file's bytes under the
 * old header). 0 (L->direct says which mode), or -errno.
 */
static int open_direct(struct loader *L)
{
	uint32_t n = L->w->n_files, align = 512;
	int *dfd = malloc((n + 1) * sizeof(int));
	int ret;

	if (!dfd)
		return oom(L, "file descriptors");
	for (uint32_t f = 0; f < n; f++)
		dfd[f] = -1;
	for (uint32_t f = 0; f < n; f++) {
		const char *path = L->w->files[f].path, *how = "";
		uint32_t mem_al = 0, off_al = 0;
		char why[96];

		ret = haccel__dio_align(L->ctx, L->fd[f], &mem_al, &off_al, &how);
		if (ret) {
			snprintf(why, sizeof(why), "%s", strerror(-ret));
		} else if (mem_al > 4096 || off_al > (1u << 20)) {
			snprintf(why, sizeof(why), "alignment %u, memory %u: too large", off_al,
				 mem_al);
			ret = -EINVAL;
		} else {
			dfd[f] = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
			if (dfd[f] < 0) {
				ret = -errno;
				snprintf(why, sizeof(why), "%s", strerror(errno));
			}
		}
		if (ret) {
			/* One warning per load: the first such file decides,
			 * and every file is read buffered. */
			haccel__warn(L->ctx, "%s: no direct I/O here (%s): buffered reads",
				     path, why);
			close_all(dfd, n);
			L->direct = false;
			return 0;
		}
		ret = check_unchanged(L, f, dfd[f], "since it was opened");
		if (ret) {
			close_all(dfd, n);
			return ret;
		}
		haccel__dbg(L->ctx, "%s: direct I/O alignment %u (memory %u), from %s",
			    path, off_al, mem_al, how);
		if (off_al > align)
			align = off_al;
	}
	for (uint32_t f = 0; f < n; f++) {
		L->fd_buffered[f] = L->fd[f];
		L->fd[f] = dfd[f];
	}
	free(dfd);
	L->off_align = align;
	return 0;
}

/*
 * Open every file buffered, check it, choose the mode, and reopen with
 * O_DIRECT when that is the mode.
 */
static int open_files(struct loader *L)
{
	uint32_t n = L->w->n_files;
	int ret;

	L->fd = malloc((n + 1) * sizeof(int));
	L->fd_buffered = malloc((n + 1) * sizeof(int));
	if (!L->fd || !L->fd_buffered) {
		free(L->fd);
		free(L->fd_buffered);
		L->fd = L->fd_buffered = NULL;
		return oom(L, "file descriptors");
	}
	for (uint32_t f = 0; f < n; f++)
		L->fd[f] = L->fd_buffered[f] = -1;
	for (uint32_t f = 0; f < n; f++) {
		L->fd[f] = open(L->w->files[f].path, O_RDONLY | O_CLOEXEC);
		if (L->fd[f] < 0)
			return haccel__fail(L->ctx, -errno, "%s: open: %s",
					    L->w->files[f].path, strerror(errno));
		ret = check_unchanged(L, f, L->fd[f], "since it was opened");
		if (ret)
			return ret;
	}

	if (L->p.flags & HACCEL_LOAD_DIRECT) {
		L->direct = true;
	} else if (L->p.flags & HACCEL_LOAD_BUFFERED) {
		L->direct = false;
	} else {
		char why[600] = "";
		double c = cached_fraction(L, why, sizeof(why));

		if (c < 0) {
			/* Wrongly direct costs a warm load some speed; wrongly
			 * buffered costs a cold one most of it. */
			L->direct = true;
			haccel__info(L->ctx, "load: page-cache residency unknown (%s): direct reads", why);
		} else {
			L->direct = c < 0.9;
			haccel__dbg(L->ctx, "load: %.0f%% of the data is in the page cache: %s reads",
				    100 * c, L->direct ? "direct" : "buffered");
		}
	}
	return L->direct ? open_direct(L) : 0;
}

/* ------------------------------------------------------------------------ */
/* Plan                                                                     */

static int plan(struct loader *L)
{
	uint64_t C = L->p.chunk_bytes, n = 0;

	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		for (uint32_t f = 0; f < L->w->n_files; f++) {
			const struct haccel__wfile *wf = &L->w->files[f];
			uint64_t lo = wf->data_start, hi = wf->data_start + wf->data_bytes;

			if (!wf->data_bytes)
				continue;
			if (L->direct) {
				lo -= lo % L->off_align;
				hi += (L->off_align - hi % L->off_align) % L->off_align;
			}
			for (uint64_t off = lo; off < hi; off += C, n++) {
				struct chunk *c;

				if (!pass)
					continue;
				c = &L->ch[n];
				c->file = f;
				c->off = off;
				c->len = hi - off < C ? hi - off : C;
				c->want_end = off + c->len < wf->data_start + wf->data_bytes ?
						      off + c->len : wf->data_start + wf->data_bytes;
				c->buf = -1;
				if (L->to_dest)
					c->dst = (char *)L->sink->direct_base + wf->dest_base +
						 (off - wf->data_start);
			}
		}
		if (!pass) {
			L->ch = calloc(n + 1, sizeof(*L->ch));
			if (!L->ch)
				return oom(L, "the read plan");
		}
	}
	L->n_ch = n;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Readers: io_uring, or a pool of pread threads                            */

/*
 * Bytes to ask for in the next read of chunk c: what is left, or with
 * HACCEL_TEST_SHORT_READS about half of it on the chunk's first read
 * (rounded down to the direct-I/O alignment, odd when buffered), so that
 * the read comes back short and is continued.
 */
static uint64_t read_len(const struct loader *L, const struct chunk *c)
{
	uint64_t rest = c->len - c->done, half = rest / 2;

	if (!L->test_short || c->done)
		return rest;
	if (L->direct)
		half -= half % L->off_align;
	else
		half |= 1;
	return half && half < rest ? half : rest;
}

/* Read what is left of chunk c with pread on fd; 0 or -errno. Short reads
 * and retries are counted in c, for the stats. */
static int pread_rest(struct loader *L, struct chunk *c, int fd)
{
	while (c->off + c->done < c->want_end) {
		ssize_t r = pread(fd, c->dst + c->done, read_len(L, c),
				  (off_t)(c->off + c->done));

		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				c->retries++;
				continue;
			}
			return -errno;
		}
		if (r == 0)
			return -ENODATA; /* end of file before the data's end */
		c->done += (uint64_t)r;
		if (c->off + c->done >= c->want_end)
			break;
		c->short_reads++;
		if (c->done < c->len && fd == L->fd[c->file] && L->direct &&
		    (c->off + c->done) % L->off_align) {
			/* A short direct read left an unaligned rest. */
			fd = L->fd_buffered[c->file];
		}
	}
	return 0;
}

/*
 * Bind a pool or copy worker to the load's node. The I/O thread's own
 * binding succeeded, so a failure here is odd (a cpuset changed under the
 * load): the worker runs unbound, and the first such failure is logged.
 */
static void bind_worker(struct loader *L, const char *what)
{
	int ret;

	if (L->p.node == HACCEL_NODE_ANY)
		return;
	ret = haccel__numa_bind_thread(L->ctx, L->p.node);
	if (ret && !atomic_exchange(&L->bind_warned, true))
		haccel__warn(L->ctx, "load: a %s thread cannot run on node %d (%s): it runs wherever the scheduler puts it (logged once per load)",
			     what, L->p.node, strerror(-ret));
}

static void *pool_worker(void *arg)
{
	struct loader *L = arg;
	struct pool_reader *P = &L->pool;

	bind_worker(L, "pread");
	pthread_mutex_lock(&P->lock);
	for (;;) {
		while (P->work_head == P->work_tail && !P->stop)
			pthread_cond_wait(&P->work_cv, &P->lock);
		if (P->stop)
			break;
		uint64_t i = P->work[P->work_head++ % P->cap];
		pthread_mutex_unlock(&P->lock);
		struct chunk *c = &L->ch[i];
		if (L->test_eagain && !(i & 1) && !c->faked) {
			/* As if the first pread had been interrupted. */
			c->faked = true;
			c->retries++;
		}
		c->err = pread_rest(L, c, L->fd[c->file]);
		pthread_mutex_lock(&P->lock);
		P->done[P->done_tail++ % P->cap] = i;
		pthread_cond_signal(&P->done_cv);
	}
	pthread_mutex_unlock(&P->lock);
	return NULL;
}

static int pool_start(struct loader *L)
{
	struct pool_reader *P = &L->pool;

	P->cap = L->p.queue_depth + 1;
	P->work = calloc(P->cap, sizeof(*P->work));
	P->done = calloc(P->cap, sizeof(*P->done));
	P->threads = calloc(L->p.threads, sizeof(*P->threads));
	if (!P->work || !P->done || !P->threads) {
		free(P->work);
		free(P->done);
		free(P->threads);
		memset(P, 0, sizeof(*P));
		return oom(L, "the pread pool");
	}
	pthread_mutex_init(&P->lock, NULL);
	pthread_cond_init(&P->work_cv, NULL);
	pthread_cond_init(&P->done_cv, NULL);
	for (uint32_t i = 0; i < L->p.threads; i++) {
		int e = pthread_create(&P->threads[i], NULL, pool_worker, L);
		if (e)
			return haccel__fail(L->ctx, -e, "load: cannot start I/O thread: %s", strerror(e));
		P->n_threads++;
	}
	return 0;
}

static void pool_stop(struct loader *L)
{
	struct pool_reader *P = &L->pool;

	if (P->threads) {
		pthread_mutex_lock(&P->lock);
		P->stop = true;
		pthread_cond_broadcast(&P->work_cv);
		pthread_mutex_unlock(&P->lock);
		for (uint32_t i = 0; i < P->n_threads; i++)
			pthread_join(P->threads[i], NULL);
		pthread_mutex_destroy(&P->lock);
		pthread_cond_destroy(&P->work_cv);
		pthread_cond_destroy(&P->done_cv);
	}
	free(P->threads);
	free(P->work);
	free(P->done);
	memset(P, 0, sizeof(*P));
}

static const char *uring_hint(int err)
{
	switch (err) {
	case EPERM:
		return " (kernel.io_uring_disabled, or a seccomp/LSM policy)";
	case ENOSYS:
		return " (kernel without io_uring, or filtered by seccomp)";
	case ENOMEM:
		return " (RLIMIT_MEMLOCK too low for the ring on this kernel)";
	default:
		return "";
	}
}

/* Choose the reader; a refused io_uring falls back to the pool. */
static int reader_start(struct loader *L)
{
	const char *env = getenv("HACCEL_FORCE_PREAD");
	int ret;

	/* One line per load says why the pool reads: a warning, except when
	 * the caller's own flag asked for it. */
	if (L->p.flags & HACCEL_LOAD_PREAD) {
		snprintf(L->st.fallback_reason, sizeof(L->st.fallback_reason),
			 "pread pool asked for (HACCEL_LOAD_PREAD)");
		haccel__info(L->ctx, "load: %s; reading with a pool of %u pread threads",
			     L->st.fallback_reason, L->p.threads);
	} else if (env && *env && strcmp(env, "0")) {
		snprintf(L->st.fallback_reason, sizeof(L->st.fallback_reason),
			 "pread pool forced by HACCEL_FORCE_PREAD=%s", env);
		haccel__warn(L->ctx, "load: %s; reading with a pool of %u pread threads",
			     L->st.fallback_reason, L->p.threads);
	} else {
		ret = io_uring_queue_init(L->p.queue_depth, &L->ring, 0);
		if (ret == 0) {
			L->use_uring = true;
			return 0;
		}
		snprintf(L->st.fallback_reason, sizeof(L->st.fallback_reason),
			 "io_uring refused: %s%s", strerror(-ret), uring_hint(-ret));
		haccel__warn(L->ctx, "load: %s; reading with a pool of %u pread threads",
			     L->st.fallback_reason, L->p.threads);
	}
	L->st.io_path = HACCEL_IO_PREAD;
	return pool_start(L);
}

static void reader_stop(struct loader *L)
{
	if (L->use_uring) {
		io_uring_queue_exit(&L->ring);
		L->use_uring = false;
	} else {
		pool_stop(L);
	}
}

/* Queue the rest of chunk i; it counts as in flight once queued. With
 * io_uring it reaches the kernel at the next submit (reap() or drain()). */
static int submit(struct loader *L, uint64_t i)
{
	struct chunk *c = &L->ch[i];

	if (!L->use_uring) {
		struct pool_reader *P = &L->pool;

		c->state = CH_INFLIGHT;
		L->in_flight++;
		pthread_mutex_lock(&P->lock);
		P->work[P->work_tail++ % P->cap] = i;
		pthread_cond_signal(&P->work_cv);
		pthread_mutex_unlock(&P->lock);
		return 0;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);
	if (!sqe) {
		/* The ring holds queue_depth entries and we never queue more. */
		return haccel__fail(L->ctx, -EIO, "load: io_uring submission queue full");
	}
	c->state = CH_INFLIGHT;
	L->in_flight++;
	if (L->test_eagain && !(i & 1) && !c->faked) {
		c->faked = true;
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, i | FAKE_EAGAIN);
		return 0;
	}
	if (c->buf >= 0 && L->fixed)
		io_uring_prep_read_fixed(sqe, L->fd[c->file], c->dst + c->done,
					 (unsigned int)read_len(L, c),
					 c->off + c->done, c->buf);
	else
		io_uring_prep_read(sqe, L->fd[c->file], c->dst + c->done,
				   (unsigned int)read_len(L, c), c->off + c->done);
	/* Page-cache hits would otherwise be copied inline, one at a time, by
	 * this thread: force them to the kernel's workers, in parallel. */
	if (!L->direct)
		sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data64(sqe, i);
	return 0;
}

static int read_error(struct loader *L, struct chunk *c, int err)
{
	const struct haccel__wfile *wf = &L->w->files[c->file];

	if (err == -ENODATA)
		return haccel__fail(L->ctx, -EBADMSG,
				    "%s: file truncated: end of file at offset %llu, but its tensors end at %llu",
				    wf->path, (unsigned long long)(c->off + c->done),
				    (unsigned long long)(wf->data_start + wf->data_bytes));
	return haccel__fail(L->ctx, -EIO, "%s: read of %llu bytes at offset %llu failed: %s",
			    wf->path, (unsigned long long)(c->len - c->done),
			    (unsigned long long)(c->off + c->done), strerror(-err));
}

/* Move pread_rest's counts of chunk c into the stats. */
static void take_counts(struct loader *L, struct chunk *c)
{
	L->st.short_reads += c->short_reads;
	L->st.retries += c->retries;
	c->short_reads = c->retries = 0;
}

/* Account for a completion (user_data data) with result res (bytes or
 * -errno). */
static int uring_complete(struct loader *L, uint64_t data, int res)
{
	uint64_t i = data & ~FAKE_EAGAIN;
	struct chunk *c = &L->ch[i];

	if (data & FAKE_EAGAIN)
		res = -EAGAIN;
	L->in_flight--;
	if (res == -EINTR || res == -EAGAIN) {
		L->st.retries++;
		return submit(L, i);
	}
	if (res < 0)
		return read_error(L, c, res);
	if (res == 0)
		return read_error(L, c, -ENODATA);
#ifdef HAVE_VALGRIND_MEMCHECK_H
	/* The kernel wrote these bytes through the ring, which memcheck
	 * does not see: say so (no-op instructions outside valgrind). */
	VALGRIND_MAKE_MEM_DEFINED(c->dst + c->done, (size_t)res);
#endif
	c->done += (uint64_t)res;
	L->st.read_bytes += (uint64_t)res;
	if (c->off + c->done >= c->want_end) {
		c->state = CH_DONE;
		return 0;
	}
	L->st.short_reads++;
	if (L->direct && (c->off + c->done) % L->off_align) {
		/* Cannot continue an unaligned direct read: finish buffered. */
		uint64_t before = c->done;
		int ret = pread_rest(L, c, L->fd_buffered[c->file]);

		L->st.read_bytes += c->done - before;
		take_counts(L, c);
		if (ret)
			return read_error(L, c, ret);
		c->state = CH_DONE;
		return 0;
	}
	return submit(L, i);
}

/*
 * The pool's finished chunks: accounted for, and with report the first
 * error turned into the load's (drain() collects without reporting: the
 * load already failed with its own message). Waits for at least one.
 */
static int pool_collect(struct loader *L, bool report)
{
	struct pool_reader *P = &L->pool;
	int err = 0;

	pthread_mutex_lock(&P->lock);
	while (P->done_head == P->done_tail)
		pthread_cond_wait(&P->done_cv, &P->lock);
	while (P->done_head != P->done_tail) {
		struct chunk *c = &L->ch[P->done[P->done_head++ % P->cap]];

		L->in_flight--;
		L->st.read_bytes += c->done;
		take_counts(L, c);
		if (c->err && !err && report)
			err = read_error(L, c, c->err);
		c->state = CH_DONE;
	}
	pthread_mutex_unlock(&P->lock);
	return err;
}

/*
 * io_uring_enter(2) statuses that say "try again": interrupted, out of
 * resources for the moment (EAGAIN), completion ring full (EBUSY: reaping
 * makes room).
 */
static bool uring_transient(int ret)
{
	return ret == -EINTR || ret == -EAGAIN || ret == -EBUSY;
}

/*
 * Wait for at least one completion and account for all that are there
 * (after a transient error of the wait, maybe none: the caller comes back).
 * On an error, reads resubmitted earlier in the batch may be queued but
 * not submitted: drain() submits them.
 */
static int reap(struct loader *L)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;
	int ret;

	if (!L->use_uring)
		return pool_collect(L, true);
	ret = io_uring_submit_and_wait(&L->ring, 1);
	if (ret < 0 && !uring_transient(ret))
		return haccel__fail(L->ctx, ret, "load: io_uring_submit_and_wait: %s",
				    strerror(-ret));
	io_uring_for_each_cqe(&L->ring, head, cqe) {
		ret = uring_complete(L, io_uring_cqe_get_data64(cqe), cqe->res);
		n++;
		if (ret) {
			io_uring_cq_advance(&L->ring, n);
			return ret;
		}
	}
	io_uring_cq_advance(&L->ring, n);
	return 0;
}

/*
 * drain() could not submit: wait for the reads the kernel holds, one
 * completion at a time. Reads still in the submission ring never reached
 * the kernel (it takes them only when asked to submit), so nothing waits
 * for them. Returns false when even waiting fails.
 */
static bool wait_in_flight(struct loader *L, int err)
{
	uint64_t unsent = io_uring_sq_ready(&L->ring);

	haccel__warn(L->ctx, "load: io_uring_submit_and_wait failed after an error (%s): waiting for the %llu reads in flight one by one",
		     strerror(-err), (unsigned long long)L->in_flight);
	L->in_flight -= unsent < L->in_flight ? unsent : L->in_flight;
	while (L->in_flight) {
		struct io_uring_cqe *cqe;
		int ret = io_uring_wait_cqe(&L->ring, &cqe);

		if (uring_transient(ret))
			continue;
		if (ret < 0) {
			haccel__err(L->ctx, "load: cannot wait for the %llu reads still in flight (io_uring_wait_cqe: %s): they may still write to the destination after haccel_load() returns; the staging memory, if any, is never freed",
				    (unsigned long long)L->in_flight, strerror(-ret));
			return false;
		}
		io_uring_cqe_seen(&L->ring, cqe);
		L->in_flight--;
	}
	return true;
}

/*
 * Let every read in flight finish (after an error) before buffers go:
 * the destination is the caller's once haccel_load() returns, and a
 * buffered read (IOSQE_ASYNC, done by a kernel worker) writes there
 * whenever it completes. in_flight counts reads queued but never submitted
 * too: run() fails right after submit() when a sink's wait() does, reap()
 * after resubmitting a short or interrupted read when a later completion
 * of the batch is an error. Waiting for their completions alone would wait
 * forever, so each round submits whatever is queued before it waits.
 * Returns false only when the reads cannot be waited for at all: then the
 * staging buffers must stay (the caller leaks them).
 */
static bool drain(struct loader *L)
{
	if (!L->use_uring) {
		while (L->in_flight)
			(void)pool_collect(L, false);
		return true;
	}
	while (L->in_flight) {
		struct io_uring_cqe *cqe;
		unsigned int head, n = 0;
		int ret = io_uring_submit_and_wait(&L->ring, 1);

		if (ret < 0 && !uring_transient(ret))
			return wait_in_flight(L, ret);
		io_uring_for_each_cqe(&L->ring, head, cqe)
			n++;
		io_uring_cq_advance(&L->ring, n);
		L->in_flight -= n < L->in_flight ? n : L->in_flight;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Delivery and checksums                                                   */

static int check_sum(struct loader *L, const struct haccel__tensor *t, uint64_t got)
{
	if (!t->has_checksum) {
		L->st.tensors_unverified++;
		return 0;
	}
	if (got != t->checksum)
		return haccel__fail(L->ctx, -EBADMSG,
				    "%s: tensor \"%s\": checksum mismatch: stored %016llx, read %016llx",
				    L->w->files[t->file].path, t->name,
				    (unsigned long long)t->checksum, (unsigned long long)got);
	L->st.tensors_verified++;
	return 0;
}

/*
 * Hand the useful bytes of completed chunk c to the sink, tensor by tensor,
 * in file order; tensors that end inside it get their checksum checked.
 */
static int deliver(struct loader *L, const struct chunk *c)
{
	const struct haccel__wfile *wf = &L->w->files[c->file];
	uint64_t ds = wf->data_start;
	uint64_t lo = c->off > ds ? c->off : ds;
	uint64_t hi = c->want_end;
	uint32_t *cur = &L->cursor[c->file], last = wf->first_tensor + wf->n_tensors;

	while (*cur < last) {
		const struct haccel__tensor *t = &L->w->tensors[*cur];
		uint64_t b = ds + t->begin, e = ds + t->end;

		if (b > hi || (b == hi && e > b))
			break;
		uint64_t pb = b > lo ? b : lo, pe = e < hi ? e : hi;
		if (pe > pb) {
			const char *src = c->dst + (pb - c->off);
			uint64_t errs = haccel__thread_errors();
			int ret = L->sink->put(L->sink->user, *cur, pb - b,
					       wf->dest_base + (pb - ds), src, pe - pb,
					       (uint32_t)c->buf);
			if (ret)
				return sink_fail(L, ret, errs, "%s: tensor \"%s\": sink refused %llu bytes",
						 wf->path, t->name, (unsigned long long)(pe - pb));
			if (L->verify)
				XXH3_64bits_update(L->xs, src, pe - pb);
			L->st.tensor_bytes += pe - pb;
		}
		if (e > hi)
			break; /* continues in the next chunk */
		if (L->verify) {
			int ret = check_sum(L, t, XXH3_64bits_digest(L->xs));
			if (ret)
				return ret;
			XXH3_64bits_reset(L->xs);
		}
		(*cur)++;
	}
	return 0;
}

/* Tensors no chunk delivered: empty ones (and every tensor of an empty file). */
static int deliver_rest(struct loader *L)
{
	for (uint32_t f = 0; f < L->w->n_files; f++) {
		const struct haccel__wfile *wf = &L->w->files[f];

		for (; L->cursor[f] < wf->first_tensor + wf->n_tensors; L->cursor[f]++) {
			const struct haccel__tensor *t = &L->w->tensors[L->cursor[f]];

			if (t->end != t->begin)
				return haccel__fail(L->ctx, -EIO, "%s: tensor \"%s\" was never read",
						    wf->path, t->name);
			if (L->verify) {
				int ret = check_sum(L, t, XXH3_64bits(NULL, 0));
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

struct hash_job {
	struct loader *L;
	uint32_t next;           /* next tensor, taken under lock */
	pthread_mutex_t lock;
	int err;
};

static void *hash_worker(void *arg)
{
	struct hash_job *j = arg;
	struct loader *L = j->L;

	for (;;) {
		pthread_mutex_lock(&j->lock);
		uint32_t i = j->next++;
		bool stop = j->err != 0;
		pthread_mutex_unlock(&j->lock);
		if (stop || i >= L->w->n_tensors)
			return NULL;
		const struct haccel__tensor *t = &L->w->tensors[i];
		uint64_t h = XXH3_64bits((const char *)L->sink->direct_base +
					 haccel__tensor_dest(L->w, t), t->end - t->begin);
		pthread_mutex_lock(&j->lock);
		int ret = check_sum(L, t, h);
		if (ret && !j->err)
			j->err = ret;
		pthread_mutex_unlock(&j->lock);
	}
}

/* Direct-to-destination mode: every tensor hashed where it landed. */
static int verify_dest(struct loader *L)
{
	struct hash_job j = { .L = L };
	pthread_t *th = calloc(L->p.threads, sizeof(*th));
	uint32_t started = 0;

	if (!th)
		return oom(L, "the checksum threads");
	pthread_mutex_init(&j.lock, NULL);
	/* This thread hashes too; a helper that fails to start is no loss. */
	for (uint32_t i = 1; i < L->p.threads; i++)
		if (!pthread_create(&th[started], NULL, hash_worker, &j))
			started++;
	hash_worker(&j);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&j.lock);
	free(th);
	return j.err;
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                 */

static void progress(struct loader *L, bool final)
{
	uint64_t t = now_ns();
	double total = 0, done, secs, rate;

	if (!L->progress || (!final && t - L->last_progress < 250000000ull))
		return;
	L->last_progress = t;
	for (uint32_t f = 0; f < L->w->n_files; f++)
		total += (double)L->w->files[f].data_bytes;
	done = (double)L->st.read_bytes;
	if (done > total)
		done = total;
	secs = (double)(t - L->t0) / 1e9;
	rate = secs > 0 ? done / secs : 0;
	fprintf(stderr, "\rhaccel: loading %.2f / %.2f GB  %.2f GB/s  ETA %.0f s   %s",
		done / 1e9, total / 1e9, rate / 1e9,
		rate > 0 ? (total - done) / rate : 0.0, final ? "\n" : "");
	fflush(stderr);
}

/* ------------------------------------------------------------------------ */
/* The load                                                                 */

static int setup_staging(struct loader *L)
{
	struct haccel_hostmem_params hp;
	struct haccel_hostmem_info info;
	struct iovec *iov;
	int ret;

	/*
	 * Twice the depth: buffers wait for in-order delivery after their read
	 * completes, and the disk should still see queue_depth reads meanwhile.
	 */
	L->n_buf = 2 * L->p.queue_depth;
	if ((uint64_t)L->n_buf > L->n_ch)
		L->n_buf = (uint32_t)(L->n_ch ? L->n_ch : 1);
	haccel_hostmem_params_init(&hp);
	hp.node = L->p.node;
	hp.flags = L->p.hostmem_flags;
	hp.bytes = (uint64_t)L->n_buf * L->p.chunk_bytes;
	ret = haccel_hostmem_alloc(L->ctx, &hp, &L->staging);
	if (ret) {
		char why[1024];

		haccel_last_error(L->ctx, why, sizeof(why));
		return haccel__fail(L->ctx, ret, "load: staging buffers (%u of %u KiB): %s%s",
				    L->n_buf, L->p.chunk_bytes >> 10, why,
				    (ret == -EPERM || ret == -ENOMEM) &&
						    !(hp.flags & HACCEL_HOSTMEM_ALLOW_UNPINNED) ?
					    "; or allow unpinned staging (HACCEL_HOSTMEM_ALLOW_UNPINNED in hostmem_flags)" :
					    "");
	}
	haccel_hostmem_info(L->staging, &info);
	L->stage = info.ptr;
	/* hostmem logged the fallback at warn level; the stats show it too. */
	L->st.staging_unpinned = !info.pinned;
	L->free_buf = calloc(L->n_buf, sizeof(*L->free_buf));
	if (!L->free_buf)
		return oom(L, "the staging buffer list");
	for (uint32_t b = 0; b < L->n_buf; b++)
		L->free_buf[L->n_free++] = L->n_buf - 1 - b;
	L->fifo = L->sink->wait != NULL;
	if (!L->use_uring)
		return 0;
	iov = calloc(L->n_buf, sizeof(*iov));
	if (!iov)
		return oom(L, "the staging buffers' registration");
	for (uint32_t b = 0; b < L->n_buf; b++) {
		iov[b].iov_base = L->stage + (uint64_t)b * L->p.chunk_bytes;
		iov[b].iov_len = L->p.chunk_bytes;
	}
	ret = io_uring_register_buffers(&L->ring, iov, L->n_buf);
	free(iov);
	if (ret == 0) {
		L->fixed = true;
		haccel__hostmem_note_registration(L->ctx, HACCEL__REG_IO_URING, L->n_buf);
		return 0;
	}
	/*
	 * Plain reads work too, at a cost per read (the kernel maps and pins
	 * the pages of each one), but the caller asked for registered
	 * staging unless it said otherwise.
	 */
	char why[320];
	snprintf(why, sizeof(why), "io_uring buffer registration of the %u staging buffers (%llu KiB) failed: %s%s",
		 L->n_buf, (unsigned long long)hp.bytes >> 10, strerror(-ret),
		 ret == -ENOMEM ? " (registered buffers count against RLIMIT_MEMLOCK without CAP_IPC_LOCK; raise it with ulimit -l or LimitMEMLOCK=)" :
		 ret == -EFAULT ? " (memory io_uring cannot pin)" : "");
	if (!(L->p.flags & HACCEL_LOAD_ALLOW_UNREGISTERED))
		return haccel__fail(L->ctx, ret, "load: %s; or allow unregistered reads (HACCEL_LOAD_ALLOW_UNREGISTERED)",
				    why);
	haccel__warn(L->ctx, "load: %s; reading without fixed buffers (HACCEL_LOAD_ALLOW_UNREGISTERED)", why);
	L->st.staging_unregistered = 1;
	return 0;
}

/* Copy the useful bytes of chunk c to the host destination: one memcpy,
 * since the host layout keeps a file's data region contiguous. */
static void copy_chunk(struct loader *L, const struct chunk *c)
{
	const struct haccel__wfile *wf = &L->w->files[c->file];
	uint64_t lo = c->off > wf->data_start ? c->off : wf->data_start;

	memcpy((char *)L->sink->direct_base + wf->dest_base + (lo - wf->data_start),
	       c->dst + (lo - c->off), c->want_end - lo);
}

static void free_push(struct loader *L, uint32_t b)
{
	L->free_buf[(L->free_head + L->n_free++) % L->n_buf] = b;
}

static int32_t free_pop(struct loader *L)
{
	uint32_t b;

	if (!L->n_free)
		return -1;
	if (!L->fifo)
		return (int32_t)L->free_buf[(L->free_head + --L->n_free) % L->n_buf];
	b = L->free_buf[L->free_head];
	L->free_head = (L->free_head + 1) % L->n_buf;
	L->n_free--;
	return (int32_t)b;
}

static void *copy_worker(void *arg)
{
	struct loader *L = arg;

	bind_worker(L, "copy");
	pthread_mutex_lock(&L->copy_lock);
	for (;;) {
		while (L->copy_head == L->copy_tail && !L->copy_stop)
			pthread_cond_wait(&L->copy_cv, &L->copy_lock);
		if (L->copy_head == L->copy_tail)
			break;
		struct chunk *c = &L->ch[L->copy_q[L->copy_head++ % (L->n_ch + 1)]];
		pthread_mutex_unlock(&L->copy_lock);
		copy_chunk(L, c);
		pthread_mutex_lock(&L->copy_lock);
		free_push(L, (uint32_t)c->buf);
		L->copied++;
		pthread_cond_signal(&L->freed_cv);
	}
	pthread_mutex_unlock(&L->copy_lock);
	return NULL;
}

static int copy_start(struct loader *L)
{
	L->copy_q = calloc(L->n_ch + 1, sizeof(*L->copy_q));
	L->copiers = calloc(L->p.threads, sizeof(*L->copiers));
	if (!L->copy_q || !L->copiers) {
		/* copy_stop() frees them only once the pool is up. */
		free(L->copy_q);
		free(L->copiers);
		L->copy_q = NULL;
		L->copiers = NULL;
		return oom(L, "the copy threads");
	}
	pthread_mutex_init(&L->copy_lock, NULL);
	pthread_cond_init(&L->copy_cv, NULL);
	pthread_cond_init(&L->freed_cv, NULL);
	L->copy_pool = true;
	for (uint32_t i = 0; i < L->p.threads; i++) {
		int e = pthread_create(&L->copiers[i], NULL, copy_worker, L);
		if (e)
			return haccel__fail(L->ctx, -e, "load: cannot start copy thread: %s", strerror(e));
		L->n_copiers++;
	}
	return 0;
}

/* Let queued copies finish (they use staging buffers), then stop. */
static void copy_stop(struct loader *L)
{
	if (!L->copy_pool)
		return;
	pthread_mutex_lock(&L->copy_lock);
	L->copy_stop = true;
	pthread_cond_broadcast(&L->copy_cv);
	pthread_mutex_unlock(&L->copy_lock);
	for (uint32_t i = 0; i < L->n_copiers; i++)
		pthread_join(L->copiers[i], NULL);
	pthread_mutex_destroy(&L->copy_lock);
	pthread_cond_destroy(&L->copy_cv);
	pthread_cond_destroy(&L->freed_cv);
	free(L->copiers);
	free(L->copy_q);
	L->copy_pool = false;
}

/* A free staging buffer, or -1; with copy threads, wait for one when no
 * read is in flight (nothing else could wake this thread). */
static int32_t take_buffer(struct loader *L)
{
	int32_t b = -1;

	if (!L->copy_pool)
		return free_pop(L);
	pthread_mutex_lock(&L->copy_lock);
	while (!L->n_free && !L->in_flight)
		pthread_cond_wait(&L->freed_cv, &L->copy_lock);
	b = free_pop(L);
	pthread_mutex_unlock(&L->copy_lock);
	return b;
}

static int run(struct loader *L)
{
	int ret = 0;

	while (L->next_consume < L->n_ch) {
		while (L->in_flight < L->p.queue_depth && L->next_submit < L->n_ch) {
			struct chunk *c = &L->ch[L->next_submit];

			if (!L->to_dest) {
				int32_t b = take_buffer(L);

				if (b < 0)
					break;
				c->buf = b;
				c->dst = L->stage + (uint64_t)c->buf * L->p.chunk_bytes;
				if (L->sink->wait) {
					/* The sink may still be copying out of it. */
					uint64_t errs = haccel__thread_errors();

					ret = L->sink->wait(L->sink->user, (uint32_t)c->buf);
					if (ret)
						return sink_fail(L, ret, errs, "load: sink wait");
				}
			}
			ret = submit(L, L->next_submit++);
			if (ret)
				return ret;
		}
		uint64_t t = now_ns();
		ret = reap(L);
		L->st.wait_ns += now_ns() - t;
		if (ret)
			return ret;
		t = now_ns();
		if (L->copy_pool) {
			/* Any completed chunk goes to the copiers, in any order. */
			pthread_mutex_lock(&L->copy_lock);
			for (uint64_t i = L->next_consume; i < L->next_submit; i++) {
				struct chunk *c = &L->ch[i];

				if (c->state != CH_DONE)
					continue;
				c->state = CH_COPYING;
				L->copy_q[L->copy_tail++ % (L->n_ch + 1)] = i;
			}
			pthread_cond_broadcast(&L->copy_cv);
			pthread_mutex_unlock(&L->copy_lock);
		}
		while (L->next_consume < L->n_ch && L->ch[L->next_consume].state >= CH_DONE) {
			struct chunk *c = &L->ch[L->next_consume++];

			if (!L->to_dest && !L->copy_pool) {
				ret = deliver(L, c);
				if (ret)
					return ret;
				free_push(L, (uint32_t)c->buf);
			}
		}
		L->st.sink_ns += now_ns() - t;
		progress(L, false);
	}
	return 0;
}

/*
 * Fault the destination in before reads land there. Kernel workers copying
 * into never-touched memory fault page by page and contend on the address
 * space's lock: a 2 GB load ran at 0.4 GB/s that way against 5 GB/s into
 * faulted memory. One populate call costs less than that. Advice only:
 * an old kernel (no MADV_POPULATE_WRITE) or a mapping that refuses it
 * leaves the reads to fault as before.
 */
static void populate_dest(struct loader *L)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t b = (uintptr_t)L->sink->direct_base, e = b + L->w->dest_bytes;

	if (pg <= 0 || !L->w->dest_bytes)
		return;
	b &= ~(uintptr_t)(pg - 1);
	e = (e + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
	(void)madvise((void *)b, e - b, MADV_POPULATE_WRITE);
}

static int validate_params(struct haccel_ctx *ctx, const struct haccel_load_params *p)
{
	const uint32_t known = HACCEL_LOAD_DIRECT | HACCEL_LOAD_BUFFERED | HACCEL_LOAD_VERIFY |
			       HACCEL_LOAD_PROGRESS | HACCEL_LOAD_PREAD |
			       HACCEL_LOAD_ALLOW_UNREGISTERED | HACCEL_LOAD_AS_GIVEN;

	if ((p->flags & ~known) || p->reserved ||
	    ((p->flags & HACCEL_LOAD_DIRECT) && (p->flags & HACCEL_LOAD_BUFFERED)))
		return haccel__fail(ctx, -EINVAL, "load: unknown flags 0x%x, reserved field set, or both DIRECT and BUFFERED",
				    p->flags);
	if (p->queue_depth < 1 || p->queue_depth > 4096 || p->threads < 1 || p->threads > 256)
		return haccel__fail(ctx, -EINVAL, "load: queue_depth must be 1..4096 and threads 1..256 (got %u, %u)",
				    p->queue_depth, p->threads);
	if (p->chunk_bytes < (64u << 10) || p->chunk_bytes > (256u << 20) || p->chunk_bytes % 4096)
		return haccel__fail(ctx, -EINVAL, "load: chunk_bytes must be a multiple of 4096 between 64 KiB and 256 MiB (got %u)",
				    p->chunk_bytes);
	if (p->node < HACCEL_NODE_ANY || p->node >= HACCEL_MAX_NODES)
		return haccel__fail(ctx, -EINVAL, "load: bad node %d", p->node);
	return 0;
}

/*
 * A buffered load through staging (haccel.h, HACCEL_LOAD_AS_GIVEN): few,
 * small buffers, so that the page-cache copies into them and the sink's
 * reads out of them stay in the CPU caches. docs/benchmarks.md has the
 * sweep behind the numbers.
 */
static void cap_staged(struct loader *L)
{
	uint32_t chunk = L->p.chunk_bytes, qd = L->p.queue_depth, most;

	if (L->p.flags & HACCEL_LOAD_AS_GIVEN)
		return;
	if (chunk > HACCEL_LOAD_STAGED_CHUNK)
		chunk = HACCEL_LOAD_STAGED_CHUNK;
	most = HACCEL_LOAD_STAGED_INFLIGHT / chunk;
	if (most < 8)
		most = 8;
	if (qd > most)
		qd = most;
	if (chunk != L->p.chunk_bytes || qd != L->p.queue_depth)
		haccel__dbg(L->ctx, "load: buffered through staging: %u KiB reads, %u in flight (asked %u KiB, %u; HACCEL_LOAD_AS_GIVEN keeps those)",
			    chunk >> 10, qd, L->p.chunk_bytes >> 10, L->p.queue_depth);
	L->p.chunk_bytes = chunk;
	L->p.queue_depth = qd;
}

/* Tell the sink what is coming, before any byte moves. */
static int sink_begin(struct loader *L)
{
	struct haccel_sink_begin b;
	uint64_t errs;
	int ret;

	if (!L->sink->begin)
		return 0;
	memset(&b, 0, sizeof(b));
	b.size = sizeof(b);
	if (!L->to_dest) {
		b.n_buf = L->n_buf;
		b.staging = L->stage;
		b.buf_bytes = L->p.chunk_bytes;
	}
	b.dest_bytes = L->w->dest_bytes;
	errs = haccel__thread_errors();
	ret = L->sink->begin(L->sink->user, &b);
	if (ret)
		return sink_fail(L, ret, errs, "load: the sink cannot take this load");
	L->begun = true;
	return 0;
}

static int load(struct loader *L)
{
	uint64_t errs;
	int ret;

	if (L->p.node != HACCEL_NODE_ANY) {
		ret = haccel__numa_bind_thread(L->ctx, L->p.node);
		if (ret)
			return haccel__fail(L->ctx, ret, "load: cannot run on node %d: %s",
					    L->p.node, strerror(-ret));
	}
	ret = open_files(L);
	if (ret)
		goto out;
	L->st.direct = L->direct;
	L->to_dest = !L->direct && L->sink->direct_base;
	/* A host layout too small fails here in every mode, before any
	 * read, not part-way through a direct load (haccel.h: direct_base is
	 * at least dest_bytes long). */
	if (L->sink->direct_base && L->sink->direct_bytes < L->w->dest_bytes) {
		ret = haccel__fail(L->ctx, -EINVAL, "load: destination of %llu bytes is smaller than the %llu the checkpoint needs",
				   (unsigned long long)L->sink->direct_bytes,
				   (unsigned long long)L->w->dest_bytes);
		goto out;
	}
	if (!L->direct && !L->to_dest)
		cap_staged(L);
	ret = plan(L);
	if (ret)
		goto out;
	if (L->to_dest)
		populate_dest(L);
	ret = reader_start(L);
	if (ret)
		goto out_reader;
	if (!L->to_dest) {
		ret = setup_staging(L);
		if (ret)
			goto out_reader;
		if (L->sink->direct_base) { /* large enough: checked above */
			ret = copy_start(L);
			if (ret)
				goto out_reader;
		}
		L->cursor = calloc(L->w->n_files + 1, sizeof(*L->cursor));
		L->xs = XXH3_createState();
		if (!L->cursor || !L->xs) {
			ret = oom(L, "the delivery state");
			goto out_reader;
		}
		for (uint32_t f = 0; f < L->w->n_files; f++)
			L->cursor[f] = L->w->files[f].first_tensor;
		XXH3_64bits_reset(L->xs);
	}
	ret = sink_begin(L);
	if (ret)
		goto out_reader;
	uint64_t t_run = now_ns();
	haccel__dbg(L->ctx, "load: %.3f s to open, plan and set up %s staging",
		    (double)(t_run - L->t0) / 1e9, L->to_dest ? "no" : "the");
	ret = run(L);
	haccel__dbg(L->ctx, "load: %.3f s reading (%.3f s waiting, %.3f s delivering)",
		    (double)(now_ns() - t_run) / 1e9, (double)L->st.wait_ns / 1e9,
		    (double)L->st.sink_ns / 1e9);
	if (ret) {
		L->stranded = !drain(L);
		copy_stop(L);
		goto out_reader;
	}
	/* Every copy done before anything reads the destination. */
	bool host = L->to_dest || L->copy_pool;
	copy_stop(L);
	if (!host)
		ret = deliver_rest(L);
	else if (L->verify)
		ret = verify_dest(L);
	if (host && !ret)
		L->st.tensor_bytes = L->w->tensor_bytes;
	if (!ret && L->sink->finish) {
		errs = haccel__thread_errors();
		ret = L->sink->finish(L->sink->user);
		if (ret)
			ret = sink_fail(L, ret, errs, "load: sink finish");
	}
	for (uint32_t f = 0; !ret && f < L->w->n_files; f++)
		ret = check_unchanged(L, f, L->fd_buffered[f] >= 0 ? L->fd_buffered[f] : L->fd[f],
				      "during the load");
	progress(L, true);
out_reader:
	copy_stop(L);
	reader_stop(L);
	/* No read or copy thread touches the staging buffers any more; the
	 * sink lets its own copies out of them finish. */
	if (L->begun && L->sink->end)
		L->sink->end(L->sink->user);
out:
	return ret;
}

/* An environment switch: set, not empty and not "0". */
static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

static void *load_thread(void *arg)
{
	struct loader *L = arg;

	L->err = load(L);
	return NULL;
}

int haccel_load(struct haccel_weights *w, const struct haccel_load_params *params,
		const struct haccel_sink *sink, struct haccel_load_stats *stats)
{
	struct loader *L;
	int ret;

	if (!w || !sink || !sink->put)
		return -EINVAL;
	L = calloc(1, sizeof(*L));
	if (!L)
		return haccel__fail(w->ctx, -ENOMEM, "load: out of memory for the loader");
	L->ctx = w->ctx;
	L->w = w;
	L->sink = &L->sink_copy;
	haccel_load_params_init(&L->p);
	if (params) {
		ret = haccel__config_copy(&L->p, sizeof(L->p), params, sizeof(L->p));
		if (ret)
			ret = haccel__fail(L->ctx, ret, "load: params size %u not supported", params->size);
		else
			ret = validate_params(L->ctx, &L->p);
	} else {
		ret = 0;
	}
	if (!ret)
		ret = sink_copy(L->ctx, sink, &L->sink_copy);
	if (ret) {
		free(L);
		return ret;
	}
	L->verify = L->p.flags & HACCEL_LOAD_VERIFY;
	L->progress = (L->p.flags & HACCEL_LOAD_PROGRESS) && isatty(STDERR_FILENO);
	L->test_short = env_on("HACCEL_TEST_SHORT_READS");
	L->test_eagain = env_on("HACCEL_TEST_EAGAIN");
	atomic_init(&L->bind_warned, false);
	L->t0 = L->last_progress = now_ns();

	if (L->p.node == HACCEL_NODE_ANY) {
		L->err = load(L);
	} else {
		/* The I/O thread runs on the node it fills; the caller's own
		 * affinity stays as it was. */
		pthread_t th;
		int e = pthread_create(&th, NULL, load_thread, L);

		if (e)
			L->err = haccel__fail(L->ctx, -e, "load: cannot start the I/O thread: %s", strerror(e));
		else
			pthread_join(th, NULL);
	}
	ret = L->err;
	L->st.ns = now_ns() - L->t0;
	if (stats)
		*stats = L->st;

	close_files(L);
	if (!L->stranded)
		haccel_hostmem_free(L->staging);
	if (L->xs)
		XXH3_freeState(L->xs);
	free(L->cursor);
	free(L->free_buf);
	free(L->ch);
	free(L);
	return ret;
}
