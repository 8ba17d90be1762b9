// SPDX-License-Identifier: MIT
/* The loader's rare failures, provoked through the linker (--wrap, see Makefile.am): a file replaced between the buffered and the O_DIRECT open, a later shard without direct I/O, each allocation of a load failing in turn (no crash, no leak, a message), io_uring_enter failing for a moment or for good, madvise interrupted while staging is faulted in. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "st-writer.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* ------------------------------------------------------------------------ */
/* open: a rename over the path, or no O_DIRECT, at the O_DIRECT open       */

static const char *replace_at, *replace_from; /* rename from -> at, once */
static const char *no_direct;                 /* O_DIRECT refused (EINVAL) */
static int direct_opens;

int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);
int __real_open64(const char *path, int flags, ...);
int __wrap_open64(const char *path, int flags, ...);

/* -1 with errno set: refuse; 0: go on to the real open. */
static int open_hook(const char *path, int flags)
{
	if (!(flags & O_DIRECT))
		return 0;
	direct_opens++;
	if (replace_at && !strcmp(path, replace_at)) {
		/* As a checkpoint writer replaces a file: atomically. */
		if (rename(replace_from, replace_at))
			return -1;
		replace_at = NULL;
	}
	if (no_direct && strstr(path, no_direct)) {
		errno = EINVAL; /* as FUSE without direct_io, tmpfs before 6.6 */
		return -1;
	}
	return 0;
}

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int __wrap_open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	if (open_hook(path, flags))
		return -1;
	return __real_open(path, flags, mode);
}

int __wrap_open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	if (open_hook(path, flags))
		return -1;
	return __real_open64(path, flags, mode);
}

/* ------------------------------------------------------------------------ */
/* The allocator: the k-th allocation fails; what is not freed is a leak    */

#define MAX_LIVE 4096

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static bool tracking;      /* between track_start() and track_stop() */
static int fail_at;        /* fail the fail_at-th allocation (1-based); 0: none */
static int n_allocs;       /* allocations asked for while tracking */
static void *live[MAX_LIVE];
static int n_live;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

/* Under alloc_lock. */
static bool alloc_fails(void)
{
	return tracking && ++n_allocs == fail_at;
}

static void note(void *p)
{
	if (tracking && p && n_live < MAX_LIVE)
		live[n_live++] = p;
}

static void forget(void *p)
{
	for (int i = 0; p && i < n_live; i++)
		if (live[i] == p) {
			live[i] = live[--n_live];
			return;
		}
}

void *__wrap_malloc(size_t n)
{
	void *p = NULL;

	pthread_mutex_lock(&alloc_lock);
	if (!alloc_fails()) {
		p = __real_malloc(n);
		note(p);
	}
	pthread_mutex_unlock(&alloc_lock);
	return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
	void *p = NULL;

	pthread_mutex_lock(&alloc_lock);
	if (!alloc_fails()) {
		p = __real_calloc(n, m);
		note(p);
	}
	pthread_mutex_unlock(&alloc_lock);
	return p;
}

void *__wrap_realloc(void *p, size_t n)
{
	void *q = NULL;

	pthread_mutex_lock(&alloc_lock);
	if (!alloc_fails()) {
		q = __real_realloc(p, n);
		if (q) {
			forget(p);
			note(q);
		}
	}
	pthread_mutex_unlock(&alloc_lock);
	return q;
}

void __wrap_free(void *p)
{
	pthread_mutex_lock(&alloc_lock);
	forget(p);
	pthread_mutex_unlock(&alloc_lock);
	__real_free(p);
}

static void track_start(int k)
{
	pthread_mutex_lock(&alloc_lock);
	tracking = true;
	fail_at = k;
	n_allocs = 0;
	n_live = 0;
	pthread_mutex_unlock(&alloc_lock);
}

static void track_stop(void)
{
	pthread_mutex_lock(&alloc_lock);
	tracking = false;
	fail_at = 0;
	pthread_mutex_unlock(&alloc_lock);
}

/* ------------------------------------------------------------------------ */
/* io_uring_submit_and_wait and madvise: scripted errors                    */

static int uring_script[8]; /* statuses returned by the next calls, 0 ends */
static int uring_next;
static int uring_persistent; /* every call: submit for real, then fail so */
static bool check_exit;     /* io_uring_queue_exit counts late completions */
static unsigned int late_cqes;

int __real_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr);
int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr);
void __real_io_uring_queue_exit(struct io_uring *ring);
void __wrap_io_uring_queue_exit(struct io_uring *ring);
int __real_madvise(void *addr, size_t len, int advice);
int __wrap_madvise(void *addr, size_t len, int advice);

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr)
{
	if (uring_persistent) {
		/* The reads reach the kernel; the wait for them fails. */
		(void)io_uring_submit(ring);
		return uring_persistent;
	}
	if (uring_next < 8 && uring_script[uring_next])
		return uring_script[uring_next++]; /* nothing submitted */
	return __real_io_uring_submit_and_wait(ring, wait_nr);
}

void __wrap_io_uring_queue_exit(struct io_uring *ring)
{
	if (check_exit) {
		/* A read the load left in flight completes meanwhile. */
		struct timespec ts = { 0, 200 * 1000000 };

		nanosleep(&ts, NULL);
		late_cqes += io_uring_cq_ready(ring);
	}
	__real_io_uring_queue_exit(ring);
}

static int madvise_fails; /* the next POPULATE_WRITEs fail: EINTR, EAGAIN, ... */

int __wrap_madvise(void *addr, size_t len, int advice)
{
	if (advice == MADV_POPULATE_WRITE && madvise_fails > 0) {
		errno = madvise_fails-- % 2 ? EINTR : EAGAIN;
		return -1;
	}
	return __real_madvise(addr, len, advice);
}

/* ------------------------------------------------------------------------ */
/* Checkpoints and loads                                                    */

/* Real disk beside the build, for O_DIRECT. */
static char *faults_tmpdir(void)
{
	char *dir = strdup("./haccel-faults-XXXXXX");

	KTAP_ASSERT(dir && mkdtemp(dir));
	return dir;
}

/* Two shards through an index: several 64 KiB chunks each, odd sizes. */
static void write_index(const char *dir)
{
	struct st_tensor a[] = { ST_T("x", "U8", 0, 0, 200001), ST_T("y", "U8", 0, 0, 77777) };
	struct st_tensor b[] = { ST_T("z", "U8", 0, 0, 150003) };
	struct st_spec sa = { .tensors = a, .n = 2 }, sb = { .tensors = b, .n = 1 };
	char path[ST_PATH];

	st_pack(a, 2);
	st_pack(b, 1);
	st_write(st_join(path, dir, "s1.safetensors"), &sa);
	st_write(st_join(path, dir, "s2.safetensors"), &sb);
	st_write_text(st_join(path, dir, "model.safetensors.index.json"),
		      "{\"metadata\":{},\"weight_map\":{\"x\":\"s1.safetensors\","
		      "\"y\":\"s1.safetensors\",\"z\":\"s2.safetensors\"}}");
}

static struct haccel_load_stats st;

/* A sink without a host layout: every byte through put(). */
struct put_sink {
	struct haccel_sink sink;
	uint8_t *dest;
};

static int put_copy(void *user, uint32_t tensor, uint64_t toff, uint64_t doff, const void *src,
		    uint64_t n, uint32_t buf)
{
	(void)tensor;
	(void)toff;
	(void)buf;
	memcpy(((struct put_sink *)user)->dest + doff, src, n);
	return 0;
}

/*
 * Load w with flags into dest (dest_bytes + 1 long), through the host
 * sink, or with put_only through put() alone. The caller's memory is
 * allocated before, so that the load's own allocations are all it tracks.
 */
static int load_with(struct haccel_weights *w, uint32_t flags, bool put_only, uint8_t *dest)
{
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_host_sink host;
	struct put_sink ps;

	haccel_weights_info(w, &info);
	memset(dest, 0xcc, info.dest_bytes + 1);
	haccel_load_params_init(&p);
	p.flags = flags;
	p.queue_depth = 4;
	p.chunk_bytes = 64 << 10;
	p.threads = 2;
	haccel_host_sink_init(&host, dest, info.dest_bytes);
	memset(&ps, 0, sizeof(ps));
	ps.sink.user = &ps;
	ps.sink.put = put_copy;
	ps.sink.size = sizeof(ps.sink);
	ps.dest = dest;
	memset(&st, 0, sizeof(st));
	return haccel_load(w, &p, put_only ? &ps.sink : &host.sink, &st);
}

static uint8_t *dest_for(struct haccel_weights *w)
{
	struct haccel_weights_info info;
	uint8_t *dest;

	haccel_weights_info(w, &info);
	dest = malloc(info.dest_bytes + 1);
	KTAP_ASSERT(dest != NULL);
	return dest;
}

/* A case's index in a fresh directory, opened (the index, or file in
 * its directory), with a destination. */
struct fx {
	struct haccel_ctx *ctx;
	char *dir;
	struct haccel_weights *w;
	uint8_t *dest;
};

static void fx_open(struct fx *f, struct haccel_ctx *ctx, const char *file)
{
	char path[ST_PATH];

	f->ctx = ctx;
	f->dir = faults_tmpdir();
	write_index(f->dir);
	f->w = ST_OPEN(ctx, file ? st_join(path, f->dir, file) : f->dir);
	f->dest = dest_for(f->w);
}

static void fx_close(struct fx *f)
{
	free(f->dest);
	haccel_weights_close(f->w);
	st_rmtree(f->dir);
	haccel_close(f->ctx);
}

/*
 * Skip the case unless a direct load of f's index reads direct
 * (need_direct) and through io_uring (need_uring): a filesystem without
 * O_DIRECT, a kernel that refuses io_uring or HACCEL_FORCE_PREAD leave
 * nothing to provoke.
 */
static void need(struct fx *f, bool need_direct, bool need_uring)
{
	const char *why = NULL;

	KTAP_ASSERT_EQ(load_with(f->w, HACCEL_LOAD_DIRECT, false, f->dest), 0);
	if (need_direct && !st.direct)
		why = "no direct I/O on this filesystem";
	else if (need_uring && st.io_path != HACCEL_IO_URING)
		why = st.fallback_reason;
	if (!why)
		return;
	ktap_diag("%s", why);
	fx_close(f);
	ktap_skip("%s", need_direct && !st.direct ? "no direct I/O here" : "no io_uring here");
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                    */

/*
 * The file is replaced (renamed over) between the buffered open, checked
 * against what haccel_weights_open() saw, and the O_DIRECT open by path:
 * "file changed", not the new file's bytes under the old header. The new
 * file is a byte-for-byte copy, so only its identity tells.
 */
static void t_replaced_between_opens(void)
{
	char path[ST_PATH], copy[ST_PATH], err[1024];
	struct fx f;

	fx_open(&f, st_ctx(), "s1.safetensors");
	st_join(path, f.dir, "s1.safetensors");
	st_join(copy, f.dir, "new.safetensors");
	need(&f, true, false);
	/* copy: the same bytes as path, another inode. */
	KTAP_ASSERT(rename(path, copy) == 0);
	write_index(f.dir);
	haccel_weights_close(f.w);
	f.w = ST_OPEN(f.ctx, path);
	replace_from = copy;
	replace_at = path;
	KTAP_EXPECT_EQ(load_with(f.w, HACCEL_LOAD_DIRECT, false, f.dest), -EBADMSG);
	KTAP_EXPECT(replace_at == NULL); /* the rename happened */
	haccel_last_error(f.ctx, err, sizeof(err));
	ktap_diag("%s", err);
	KTAP_EXPECT(strstr(err, "file changed since it was opened") != NULL);
	KTAP_EXPECT(strstr(err, "replaced") != NULL);
	KTAP_EXPECT(strstr(err, "s1.safetensors") != NULL);
	replace_at = NULL;
	/* Reopened, the checkpoint loads. */
	haccel_weights_close(f.w);
	f.w = ST_OPEN(f.ctx, path);
	KTAP_EXPECT_EQ(load_with(f.w, HACCEL_LOAD_DIRECT, false, f.dest), 0);
	st_expect_tensors(f.w, f.dest, "reopened");
	fx_close(&f);
}

/*
 * One shard of an index has no O_DIRECT, the first or a later one: every
 * shard is read buffered, with one warning, on io_uring and the pool. A
 * later shard once left the earlier ones on O_DIRECT descriptors that the
 * buffered plan then read unaligned (EINVAL).
 */
static void t_one_shard_without_direct_io(void)
{
	static const char *const shard[] = { "s2.safetensors", "s1.safetensors" };
	struct log_cap lc;
	char err[1024] = "";
	struct fx f;

	fx_open(&f, cap_ctx(&lc), NULL);
	need(&f, true, false);
	for (int s = 0; s < 2; s++)
		for (int pool = 0; pool < 2; pool++) {
			uint32_t flags = HACCEL_LOAD_DIRECT | (pool ? HACCEL_LOAD_PREAD : 0);
			int ret;

			err[0] = '\0';
			no_direct = shard[s];
			lc.n = 0;
			ret = load_with(f.w, flags, false, f.dest);
			no_direct = NULL;
			if (ret)
				haccel_last_error(f.ctx, err, sizeof(err));
			ktap_diag("%s refused, %s: %d %s", shard[s],
				  pool ? "pool" : "io_uring", ret, err);
			KTAP_EXPECT_EQ(ret, 0);
			KTAP_EXPECT_EQ(st.direct, 0);
			KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "no direct I/O"), 1);
			KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, shard[s]), 1);
			st_expect_tensors(f.w, f.dest, shard[s]);
		}
	fx_close(&f);
}

/*
 * Each allocation of a load fails in turn, k = 1, 2, ... until a load
 * makes fewer than k: no crash (open_files() once left its descriptor
 * arrays half set for close_files()), nothing leaked (copy_start() once
 * lost one of its two arrays), and the failure says what ran out (bare
 * -ENOMEM returns once left haccel_last_error() with an older message).
 */
static void sweep(struct haccel_ctx *ctx, struct haccel_weights *w, uint32_t flags, bool put_only,
		  const char *what)
{
	struct haccel_load_params bad;
	struct haccel_host_sink none;
	unsigned int failures = ktap_failures();
	char err[1024];
	uint8_t *dest = dest_for(w);
	int k;

	haccel_load_params_init(&bad);
	bad.flags = 1u << 30;
	haccel_host_sink_init(&none, dest, 1);
	/* A first load makes what a context makes once (and keeps). */
	KTAP_ASSERT_EQ(load_with(w, flags, put_only, dest), 0);
	for (k = 1; k < 1000; k++) {
		int ret, allocs, leaked;

		/* An older message, that the failure must replace. */
		KTAP_ASSERT_EQ(haccel_load(w, &bad, &none.sink, NULL), -EINVAL);
		track_start(k);
		ret = load_with(w, flags, put_only, dest);
		track_stop();
		allocs = n_allocs;
		leaked = n_live;
		haccel_last_error(ctx, err, sizeof(err));
		if (allocs < k) {
			KTAP_EXPECT_EQ(ret, 0);
			st_expect_tensors(w, dest, what);
			break;
		}
		if (ret)
			ktap_diag("%s, allocation %d of %d fails: %d %s", what, k, allocs, ret,
				  err);
		KTAP_EXPECT(ret == 0 || ret == -ENOMEM);
		if (ret) {
			KTAP_EXPECT(strstr(err, "unknown flags") == NULL);
			KTAP_EXPECT(strstr(err, "out of memory") != NULL);
		}
		KTAP_EXPECT_EQ(leaked, 0);
		if (ktap_failures() != failures) {
			ktap_diag("%s: wrong when allocation %d of %d failed", what, k, allocs);
			free(dest);
			return;
		}
	}
	ktap_diag("%s: %d allocations per load, each failed once", what, k - 1);
	KTAP_EXPECT(k > 3);
	free(dest);
}

static void t_every_allocation_fails(void)
{
	struct fx f;

	fx_open(&f, st_ctx(), NULL);
	sweep(f.ctx, f.w, HACCEL_LOAD_DIRECT, false, "direct, host sink (copy threads)");
	sweep(f.ctx, f.w, HACCEL_LOAD_BUFFERED | HACCEL_LOAD_VERIFY, false,
	      "buffered into the host sink");
	sweep(f.ctx, f.w, HACCEL_LOAD_DIRECT | HACCEL_LOAD_VERIFY, true, "direct, put() only");
	sweep(f.ctx, f.w, HACCEL_LOAD_BUFFERED, true, "buffered, put() only");
	sweep(f.ctx, f.w, HACCEL_LOAD_DIRECT | HACCEL_LOAD_PREAD, false, "direct, pread pool");
	sweep(f.ctx, f.w, 0, false, "automatic mode");
	fx_close(&f);
}

/*
 * io_uring_submit_and_wait fails for a moment (EAGAIN: no resources just
 * now, EBUSY: completion ring full, EINTR): the load waits again and
 * succeeds, as docs/weights.md says. EAGAIN and EBUSY once failed it.
 */
static void t_uring_wait_transient(void)
{
	char err[1024] = "";
	struct fx f;

	fx_open(&f, st_ctx(), NULL);
	need(&f, false, true);
	for (int mode = 0; mode < 3; mode++) {
		static const uint32_t flags[] = { HACCEL_LOAD_DIRECT, HACCEL_LOAD_BUFFERED,
						  HACCEL_LOAD_BUFFERED | HACCEL_LOAD_VERIFY };
		int ret;

		memset(uring_script, 0, sizeof(uring_script));
		uring_script[0] = -EAGAIN;
		uring_script[1] = -EBUSY;
		uring_script[2] = -EINTR;
		uring_script[3] = -EAGAIN;
		uring_next = 0;
		ret = load_with(f.w, flags[mode] | HACCEL_LOAD_VERIFY, mode == 2, f.dest);
		if (ret)
			haccel_last_error(f.ctx, err, sizeof(err));
		ktap_diag("flags %#x: %d %s", flags[mode], ret, err);
		KTAP_EXPECT_EQ(ret, 0);
		KTAP_EXPECT_EQ(st.io_path, HACCEL_IO_URING);
		KTAP_EXPECT_EQ(uring_next, 4);
		st_expect_tensors(f.w, f.dest, "transient io_uring_enter errors");
	}
	memset(uring_script, 0, sizeof(uring_script));
	fx_close(&f);
}

/*
 * io_uring_submit_and_wait fails for good with reads in the kernel: the
 * load fails with that error, but only once every read has completed
 * (waited for one by one): a buffered read lands in the caller's memory
 * whenever it completes, so none may be left when haccel_load() returns.
 * The ring's teardown counts completions that arrive after the load;
 * drain() once gave up on the first such error and left them all.
 */
static void t_uring_wait_fails_for_good(void)
{
	struct log_cap lc;
	char err[1024];
	struct fx f;

	fx_open(&f, cap_ctx(&lc), NULL);
	need(&f, false, true);
	for (int mode = 0; mode < 3; mode++) {
		static const uint32_t flags[] = { HACCEL_LOAD_BUFFERED, HACCEL_LOAD_DIRECT,
						  HACCEL_LOAD_BUFFERED };

		lc.n = 0;
		late_cqes = 0;
		check_exit = true;
		uring_persistent = -ENXIO;
		KTAP_EXPECT_EQ(load_with(f.w, flags[mode], mode == 2, f.dest), -ENXIO);
		uring_persistent = 0;
		check_exit = false;
		haccel_last_error(f.ctx, err, sizeof(err));
		ktap_diag("flags %#x%s: %s", flags[mode], mode == 2 ? ", put() only" : "", err);
		KTAP_EXPECT(strstr(err, "io_uring_submit_and_wait") != NULL);
		KTAP_EXPECT_EQ(late_cqes, 0);
		KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "one by one"), 1);
		KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_ERROR, "still in flight"), 0);
		/* Nothing left behind: the next load works. */
		KTAP_EXPECT_EQ(load_with(f.w, flags[mode], mode == 2, f.dest), 0);
		st_expect_tensors(f.w, f.dest, "after a failed wait");
	}
	fx_close(&f);
}

/*
 * madvise(MADV_POPULATE_WRITE) of the staging buffers is interrupted
 * (EINTR) or short of a resource for a moment (EAGAIN): hostmem tries
 * again. EINTR once failed the load.
 */
static void t_staging_populate_interrupted(void)
{
	char err[1024] = "";
	struct fx f;
	int ret;

	fx_open(&f, st_ctx(), NULL);
	madvise_fails = 3; /* EINTR, EAGAIN, EINTR */
	ret = load_with(f.w, HACCEL_LOAD_DIRECT | HACCEL_LOAD_VERIFY, false, f.dest);
	if (ret)
		haccel_last_error(f.ctx, err, sizeof(err));
	ktap_diag("%d %s", ret, err);
	KTAP_EXPECT_EQ(ret, 0);
	KTAP_EXPECT_EQ(madvise_fails, 0);
	st_expect_tensors(f.w, f.dest, "interrupted populate");
	madvise_fails = 0;
	fx_close(&f);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_replaced_between_opens),
	KTAP_CASE(t_one_shard_without_direct_io),
	KTAP_CASE(t_every_allocation_fails),
	KTAP_CASE_TIMEOUT(t_uring_wait_transient, 20),
	KTAP_CASE_TIMEOUT(t_uring_wait_fails_for_good, 20),
	KTAP_CASE(t_staging_populate_interrupted),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
