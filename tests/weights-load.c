// SPDX-License-Identifier: MIT
/* The loader puts every byte where it belongs through io_uring and the pread pool, direct and buffered, continues short reads and retries, tells sinks where staging is (begin/end), turns changed files, bad checksums and sink errors into prompt errors, and says once why it reads with the pool. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "st-writer.h"

/* Test files live beside the build (a real disk, for O_DIRECT), not in a
 * /tmp that may be tmpfs. */
static char *load_tmpdir(void)
{
	char *dir = strdup("./haccel-load-XXXXXX");

	KTAP_ASSERT(dir && mkdtemp(dir));
	return dir;
}

/* Tensors of 0, 1, 4097, 3 MiB + 5 and odd sizes: nothing aligned, and a
 * file size that is no multiple of 512 (so none of 4096), checked below. */
static struct st_tensor mixed[] = {
	ST_T("a.empty", "F32", 0, 0, 0),
	ST_T("b.one", "U8", 0, 0, 1),
	ST_T("c.odd", "U8", 0, 0, 4097),
	ST_T("d.big", "U8", 0, 0, 3 * 1048576 + 5),
	ST_T("e.bf16", "BF16", 0, 0, 3, 1001),
	ST_T("f.tail_empty", "I8", 0, 0, 0),
};
#define N_MIXED (sizeof(mixed) / sizeof(mixed[0]))

/* __metadata__ with the checksum of every tensor (one wrong when asked). */
static char *checksum_meta(const struct st_tensor *t, size_t n, int corrupt)
{
	struct st_buf b = { 0 };

	st_puts(&b, "{");
	for (size_t i = 0; i < n; i++) {
		uint64_t len = t[i].end - t[i].begin;
		uint8_t *d = malloc(len + 1);

		for (uint64_t k = 0; k < len; k++)
			d[k] = st_data_byte(t[i].begin + k);
		uint64_t h = XXH3_64bits(d, len) ^ (corrupt == (int)i ? 1 : 0);
		free(d);
		st_puts(&b, "%s\"%s%s\":\"%016llx\"", i ? "," : "", HACCEL_CHECKSUM_PREFIX,
			t[i].name, (unsigned long long)h);
	}
	st_puts(&b, "}");
	return b.s;
}

static void write_mixed(const char *path, int with_sums, int corrupt)
{
	struct st_spec s = { .tensors = mixed, .n = N_MIXED };
	char *meta = NULL;

	st_pack(mixed, N_MIXED);
	if (with_sums)
		s.meta = meta = checksum_meta(mixed, N_MIXED, corrupt);
	st_write(path, &s);
	free(meta);
}

static struct haccel_load_stats st;

/* Load w with flags into dest (its dest_bytes); returns the status. */
static int load_to(struct haccel_weights *w, uint32_t flags, uint32_t qd, uint32_t chunk,
		   uint8_t *dest, uint64_t dest_bytes)
{
	struct haccel_host_sink sink;

	haccel_host_sink_init(&sink, dest, dest_bytes);
	return st_load(w, &sink.sink, flags, qd, chunk, &st);
}

/* Load w with flags into a fresh destination, filled with 0xcc first;
 * returns the status. */
static int load_into(struct haccel_weights *w, uint32_t flags, uint32_t qd,
		     uint32_t chunk, uint8_t **dest_out)
{
	struct haccel_weights_info info;
	uint8_t *dest;
	int ret;

	haccel_weights_info(w, &info);
	dest = malloc(info.dest_bytes + 1);
	KTAP_ASSERT(dest != NULL);
	memset(dest, 0xcc, info.dest_bytes + 1);
	ret = load_to(w, flags, qd, chunk, dest, info.dest_bytes);
	if (dest_out)
		*dest_out = dest;
	else
		free(dest);
	return ret;
}

static void t_every_path_every_byte(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], what[128];
	static const struct { uint32_t flags; uint32_t qd, chunk; } runs[] = {
		{ HACCEL_LOAD_DIRECT, 32, 64 << 10 },
		{ HACCEL_LOAD_DIRECT, 1, 64 << 10 },
		{ HACCEL_LOAD_DIRECT, 4, 4 << 20 },
		{ HACCEL_LOAD_BUFFERED, 32, 64 << 10 },
		{ HACCEL_LOAD_BUFFERED, 2, 1 << 20 },
		{ HACCEL_LOAD_DIRECT | HACCEL_LOAD_PREAD, 8, 64 << 10 },
		{ HACCEL_LOAD_BUFFERED | HACCEL_LOAD_PREAD, 8, 64 << 10 },
		{ 0, 16, 128 << 10 }, /* automatic mode */
	};
	struct haccel_weights *w;
	uint8_t *dest;

	struct stat sb;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	/* Direct reads must widen both ends of the data region: its end is
	 * aligned to neither 512 nor 4096. */
	KTAP_ASSERT(stat(path, &sb) == 0);
	ktap_diag("file size %lld", (long long)sb.st_size);
	KTAP_ASSERT(sb.st_size % 512 != 0);
	w = ST_OPEN(ctx, path);
	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		uint32_t flags = runs[r].flags | HACCEL_LOAD_VERIFY;

		snprintf(what, sizeof(what), "flags %#x depth %u chunk %u", runs[r].flags,
			 runs[r].qd, runs[r].chunk);
		KTAP_ASSERT_EQ(load_into(w, flags, runs[r].qd, runs[r].chunk, &dest), 0);
		st_expect_tensors(w, dest, what);
		free(dest);
		KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
		KTAP_EXPECT_EQ(st.tensors_unverified, 0);
		KTAP_EXPECT_EQ(st.io_path, runs[r].flags & HACCEL_LOAD_PREAD ? HACCEL_IO_PREAD : HACCEL_IO_URING);
		if (runs[r].flags & HACCEL_LOAD_BUFFERED)
			KTAP_EXPECT_EQ(st.direct, 0);
		if ((runs[r].flags & HACCEL_LOAD_DIRECT) && !st.direct)
			ktap_diag("%s: this filesystem has no O_DIRECT: read buffered", what);
		if (st.direct)
			KTAP_EXPECT(st.read_bytes >= st.tensor_bytes); /* aligned extents */
		KTAP_EXPECT(st.ns > 0);
		if (ktap_failures()) {
			ktap_diag("failed run: %s", what);
			break;
		}
	}
	/* Without VERIFY nothing is hashed; without sums nothing verified. */
	KTAP_ASSERT_EQ(load_into(w, 0, 8, 64 << 10, NULL), 0);
	KTAP_EXPECT_EQ(st.tensors_verified + st.tensors_unverified, 0);
	haccel_weights_close(w);
	write_mixed(path, 0, -1);
	w = ST_OPEN(ctx, path);
	KTAP_ASSERT_EQ(load_into(w, HACCEL_LOAD_VERIFY | HACCEL_LOAD_DIRECT, 8, 64 << 10, NULL), 0);
	KTAP_EXPECT_EQ(st.tensors_unverified, N_MIXED);
	KTAP_EXPECT_EQ(st.tensors_verified, 0);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/*
 * io_uring's reads into a destination nothing wrote before, buffered
 * (straight into it) and direct (through staging), every byte compared.
 * Under memcheck (weights-load-memcheck.vg) the buffered run needs the
 * loader to mark what the ring wrote defined: memcheck does not see the
 * kernel's writes, so without the marks the comparisons read
 * "uninitialised" bytes and the case fails.
 */
static void t_uring_fresh_dest(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH];
	static const uint32_t modes[] = { HACCEL_LOAD_BUFFERED, HACCEL_LOAD_DIRECT };
	struct haccel_weights_info info;
	struct haccel_weights *w;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	w = ST_OPEN(ctx, path);
	haccel_weights_info(w, &info);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		uint8_t *dest = malloc(info.dest_bytes);

		KTAP_ASSERT(dest != NULL);
		KTAP_ASSERT_EQ(load_to(w, modes[m] | HACCEL_LOAD_VERIFY, 32, 4u << 20, dest,
				       info.dest_bytes), 0);
		KTAP_EXPECT_EQ(st.io_path, HACCEL_IO_URING);
		KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
		st_expect_tensors(w, dest, m ? "fresh direct" : "fresh buffered");
		free(dest);
	}
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

static void t_sharded(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH];
	struct st_tensor a[] = { ST_T("x", "U8", 0, 0, 5000), ST_T("y", "U8", 0, 0, 3) };
	struct st_tensor b[] = { ST_T("z", "U8", 0, 0, 70000) };
	struct st_spec sa = { .tensors = a, .n = 2 }, sb = { .tensors = b, .n = 1 };
	struct haccel_weights_info info;
	struct haccel_tensor_info tz;
	struct haccel_weights *w;
	uint8_t *dest;
	uint32_t iz;

	st_pack(a, 2);
	st_pack(b, 1);
	st_write(st_join(path, dir, "m-1.safetensors"), &sa);
	st_write(st_join(path, dir, "m-2.safetensors"), &sb);
	st_write_text(st_join(path, dir, "model.safetensors.index.json"),
		      "{\"metadata\":{},\"weight_map\":{\"x\":\"m-1.safetensors\","
		      "\"y\":\"m-1.safetensors\",\"z\":\"m-2.safetensors\"}}");
	w = ST_OPEN(ctx, dir);
	haccel_weights_info(w, &info);
	KTAP_ASSERT_EQ(info.n_files, 2);
	KTAP_ASSERT_EQ(haccel_weights_find(w, "z", &iz), 0);
	KTAP_ASSERT_EQ(haccel_weights_tensor(w, iz, &tz), 0);
	KTAP_EXPECT_EQ(tz.dest_offset % 4096, 0); /* second file's region */
	KTAP_EXPECT(tz.dest_offset >= 5003);
	for (int mode = 0; mode < 2; mode++) {
		KTAP_ASSERT_EQ(load_into(w, mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT,
					 4, 64 << 10, &dest), 0);
		st_expect_tensors(w, dest, mode ? "sharded buffered" : "sharded direct");
		KTAP_EXPECT_EQ(st.tensor_bytes, 5003 + 70000);
		free(dest);
	}
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

static void t_checksum_mismatch(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], err[1024];
	struct haccel_weights *w;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, 3);
	w = ST_OPEN(ctx, path);
	for (int mode = 0; mode < 2; mode++) {
		uint32_t f = HACCEL_LOAD_VERIFY | (mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT);

		KTAP_EXPECT_EQ(load_into(w, f, 8, 64 << 10, NULL), -EBADMSG);
		haccel_last_error(ctx, err, sizeof(err));
		KTAP_EXPECT(strstr(err, "d.big") && strstr(err, "checksum mismatch"));
		KTAP_EXPECT(strstr(err, "model.safetensors") != NULL);
	}
	/* Without VERIFY the same file loads. */
	KTAP_EXPECT_EQ(load_into(w, HACCEL_LOAD_DIRECT, 8, 64 << 10, NULL), 0);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void t_file_changed_before_load(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], err[1024];
	struct haccel_weights *w;
	int fd;

	write_mixed(st_join(path, dir, "model.safetensors"), 0, -1);
	w = ST_OPEN(ctx, path);
	sleep_ms(30); /* past the timestamp granularity */
	fd = open(path, O_WRONLY);
	KTAP_ASSERT(fd >= 0);
	off_t end = lseek(fd, 0, SEEK_END);
	KTAP_ASSERT(pwrite(fd, "X", 1, end - 10) == 1); /* a data byte */
	close(fd);
	KTAP_EXPECT_EQ(load_into(w, 0, 8, 64 << 10, NULL), -EBADMSG);
	haccel_last_error(ctx, err, sizeof(err));
	KTAP_EXPECT(strstr(err, "changed since it was opened") != NULL);
	haccel_weights_close(w);

	/* Truncated between open and load: the size says so at once. */
	write_mixed(path, 0, -1);
	w = ST_OPEN(ctx, path);
	KTAP_ASSERT(truncate(path, 5000) == 0);
	KTAP_EXPECT_EQ(load_into(w, 0, 8, 64 << 10, NULL), -EBADMSG);
	haccel_weights_close(w);

	/* Removed since it was opened: its open says so (haccel.h). */
	write_mixed(path, 0, -1);
	w = ST_OPEN(ctx, path);
	KTAP_ASSERT(unlink(path) == 0);
	KTAP_EXPECT_EQ(load_into(w, 0, 8, 64 << 10, NULL), -ENOENT);
	haccel_last_error(ctx, err, sizeof(err));
	KTAP_EXPECT(strstr(err, "open") && strstr(err, "model.safetensors"));
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/* A sink that sabotages the file on its first put, then copies like the
 * host sink. */
struct evil_sink {
	struct haccel_sink sink;
	struct haccel_host_sink host;
	const char *path;
	int mode; /* 0 truncate, 1 rewrite a byte, 2 fail with -ENOSPC */
	int calls;
};

static int evil_put(void *user, uint32_t tensor, uint64_t toff, uint64_t doff,
		    const void *src, uint64_t n, uint32_t buf)
{
	struct evil_sink *e = user;

	if (e->calls++ == 0) {
		if (e->mode == 0) {
			if (truncate(e->path, 6000))
				return -errno;
		} else if (e->mode == 1) {
			int fd = open(e->path, O_WRONLY);
			sleep_ms(30);
			if (fd < 0 || pwrite(fd, "Y", 1, 200) != 1)
				return -EIO;
			close(fd);
		} else {
			return -ENOSPC;
		}
	}
	return e->host.sink.put(&e->host, tensor, toff, doff, src, n, buf);
}

static void t_file_changed_during_load(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], err[1024];
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_weights *w;
	struct evil_sink e;
	uint8_t *dest;

	write_mixed(st_join(path, dir, "model.safetensors"), 0, -1);
	for (int mode = 0; mode < 3; mode++) {
		w = ST_OPEN(ctx, path);
		haccel_weights_info(w, &info);
		dest = malloc(info.dest_bytes);
		memset(&e, 0, sizeof(e));
		haccel_host_sink_init(&e.host, dest, info.dest_bytes);
		e.sink.user = &e;
		e.sink.put = evil_put;
		e.path = path;
		e.mode = mode;
		haccel_load_params_init(&p);
		/* Through staging, one small read at a time: the sabotage
		 * lands before most of the file is read. */
		p.flags = HACCEL_LOAD_DIRECT;
		p.queue_depth = 1;
		p.chunk_bytes = 64 << 10;
		int ret = haccel_load(w, &p, &e.sink, &st);
		haccel_last_error(ctx, err, sizeof(err));
		if (mode == 0) {
			KTAP_EXPECT_EQ(ret, -EBADMSG);
			KTAP_EXPECT(strstr(err, "truncated") || strstr(err, "changed"));
		} else if (mode == 1) {
			KTAP_EXPECT_EQ(ret, -EBADMSG);
			KTAP_EXPECT(strstr(err, "changed during the load") != NULL);
		} else {
			KTAP_EXPECT_EQ(ret, -ENOSPC);
			KTAP_EXPECT(strstr(err, "sink refused") != NULL);
		}
		free(dest);
		haccel_weights_close(w);
		write_mixed(path, 0, -1);
	}
	st_rmtree(dir);
	haccel_close(ctx);
}

/* An asynchronous sink: records the order of puts and waits. */
struct async_sink {
	struct haccel_sink sink;
	uint64_t last_dest;
	int out_of_order, waits, finishes, pending[64];
	uint8_t *dest;
};

static int async_put(void *user, uint32_t tensor, uint64_t toff, uint64_t doff,
		     const void *src, uint64_t n, uint32_t buf)
{
	struct async_sink *a = user;

	(void)tensor;
	(void)toff;
	if (doff < a->last_dest)
		a->out_of_order++;
	a->last_dest = doff + n;
	memcpy(a->dest + doff, src, n);
	a->pending[buf % 64] = 1;
	return 0;
}

static int async_wait(void *user, uint32_t buf)
{
	struct async_sink *a = user;

	a->waits++;
	a->pending[buf % 64] = 0;
	return 0;
}

static int async_finish(void *user)
{
	((struct async_sink *)user)->finishes++;
	return 0;
}

static void t_async_sink_protocol(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH];
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_weights *w;
	struct async_sink a;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	w = ST_OPEN(ctx, path);
	haccel_weights_info(w, &info);
	for (int mode = 0; mode < 2; mode++) {
		memset(&a, 0, sizeof(a));
		a.dest = calloc(1, info.dest_bytes);
		a.sink.user = &a;
		a.sink.put = async_put;
		a.sink.wait = async_wait;
		a.sink.finish = async_finish;
		haccel_load_params_init(&p);
		/* No host layout offered: buffered reads go through staging too. */
		p.flags = HACCEL_LOAD_VERIFY | (mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT);
		p.queue_depth = 4;
		p.chunk_bytes = 64 << 10;
		KTAP_ASSERT_EQ(haccel_load(w, &p, &a.sink, &st), 0);
		KTAP_EXPECT_EQ(a.out_of_order, 0);
		KTAP_EXPECT_EQ(a.finishes, 1);
		/* Every buffer use after the first four waited first. */
		KTAP_EXPECT(a.waits >= (int)(info.tensor_bytes / (64 << 10)) - 4);
		KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
		st_expect_tensors(w, a.dest, mode ? "async buffered" : "async direct");
		free(a.dest);
	}
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/* A sink with begin() and end(): records what the loader tells it and
 * checks each put against it. */
struct hook_sink {
	struct haccel_sink sink;
	unsigned char tail[16];  /* a newer caller's larger struct */
	struct haccel_sink_begin b;
	int begins, ends, puts, puts_outside, waits, waits_on_last_put;
	int fail_begin, fail_put;
	uint32_t last_put_buf;
	uint8_t *dest;
};

static int hook_begin(void *user, const struct haccel_sink_begin *b)
{
	struct hook_sink *h = user;

	h->begins++;
	h->b = *b;
	return h->fail_begin;
}

static void hook_end(void *user)
{
	((struct hook_sink *)user)->ends++;
}

static int hook_put(void *user, uint32_t tensor, uint64_t toff, uint64_t doff,
		    const void *src, uint64_t n, uint32_t buf)
{
	struct hook_sink *h = user;
	const char *p = src, *base = h->b.staging;

	(void)tensor;
	(void)toff;
	h->puts++;
	/* Inside the buffer it names, announced by begin(). */
	if (h->begins != 1 || h->ends || buf >= h->b.n_buf ||
	    p < base + (uint64_t)buf * h->b.buf_bytes ||
	    p + n > base + (uint64_t)(buf + 1) * h->b.buf_bytes)
		h->puts_outside++;
	h->last_put_buf = buf;
	memcpy(h->dest + doff, src, n);
	return h->fail_put && h->puts == 3 ? h->fail_put : 0;
}

static int hook_wait(void *user, uint32_t buf)
{
	struct hook_sink *h = user;

	h->waits++;
	if (h->puts && buf == h->last_put_buf)
		h->waits_on_last_put++;
	return 0;
}

static struct hook_sink *hook_new(const struct haccel_weights_info *info)
{
	struct hook_sink *h = calloc(1, sizeof(*h));

	KTAP_ASSERT(h != NULL);
	h->dest = calloc(1, info->dest_bytes + 1);
	KTAP_ASSERT(h->dest != NULL);
	h->sink.user = h;
	h->sink.put = hook_put;
	h->sink.wait = hook_wait;
	h->sink.size = sizeof(h->sink);
	h->sink.begin = hook_begin;
	h->sink.end = hook_end;
	return h;
}

static void hook_free(struct hook_sink *h)
{
	free(h->dest);
	free(h);
}

static void t_sink_begin_end(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], err[1024];
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_weights *w;
	struct hook_sink *h;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	w = ST_OPEN(ctx, path);
	haccel_weights_info(w, &info);
	haccel_load_params_init(&p);
	p.chunk_bytes = 64 << 10;
	p.flags = HACCEL_LOAD_VERIFY;

	/* Through staging, direct and buffered: begin() first, with the
	 * buffers every put() then comes from; end() once, last. */
	for (int mode = 0; mode < 2; mode++) {
		h = hook_new(&info);
		p.flags = HACCEL_LOAD_VERIFY | (mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT);
		p.queue_depth = 1; /* two buffers: FIFO reuse is deterministic */
		KTAP_ASSERT_EQ(haccel_load(w, &p, &h->sink, &st), 0);
		KTAP_EXPECT_EQ(h->begins, 1);
		KTAP_EXPECT_EQ(h->ends, 1);
		KTAP_EXPECT_EQ(h->b.size, sizeof(struct haccel_sink_begin));
		KTAP_EXPECT_EQ(h->b.n_buf, 2);
		KTAP_EXPECT(h->b.staging != NULL);
		KTAP_EXPECT_EQ(h->b.buf_bytes, 64 << 10);
		KTAP_EXPECT_EQ(h->b.dest_bytes, info.dest_bytes);
		KTAP_EXPECT(h->puts > 0);
		KTAP_EXPECT_EQ(h->puts_outside, 0);
		/* An asynchronous sink gets the buffer freed longest ago, never
		 * the one whose copy it has just been handed. */
		KTAP_EXPECT(h->waits > 0);
		KTAP_EXPECT_EQ(h->waits_on_last_put, 0);
		KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
		st_expect_tensors(w, h->dest, mode ? "hooks buffered" : "hooks direct");
		hook_free(h);
	}

	/* Reading straight into direct_base: begin() says there is no staging. */
	h = hook_new(&info);
	h->sink.direct_base = h->dest;
	h->sink.direct_bytes = info.dest_bytes;
	p.flags = HACCEL_LOAD_BUFFERED;
	p.queue_depth = 8;
	KTAP_ASSERT_EQ(haccel_load(w, &p, &h->sink, &st), 0);
	KTAP_EXPECT_EQ(h->begins, 1);
	KTAP_EXPECT_EQ(h->ends, 1);
	KTAP_EXPECT_EQ(h->b.n_buf, 0);
	KTAP_EXPECT(h->b.staging == NULL);
	KTAP_EXPECT_EQ(h->b.dest_bytes, info.dest_bytes);
	KTAP_EXPECT_EQ(h->puts, 0);
	st_expect_tensors(w, h->dest, "hooks, to the destination");
	hook_free(h);

	/* begin() refuses: nothing is delivered, end() is not owed. */
	h = hook_new(&info);
	h->fail_begin = -ENOSPC;
	p.flags = HACCEL_LOAD_DIRECT;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), -ENOSPC);
	haccel_last_error(ctx, err, sizeof(err));
	ktap_diag("%s", err);
	KTAP_EXPECT(strstr(err, "sink cannot take this load") != NULL);
	KTAP_EXPECT_EQ(h->begins, 1);
	KTAP_EXPECT_EQ(h->ends, 0);
	KTAP_EXPECT_EQ(h->puts, 0);
	hook_free(h);

	/* A put fails mid-load: end() still comes, once. */
	h = hook_new(&info);
	h->fail_put = -EIO;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), -EIO);
	KTAP_EXPECT_EQ(h->begins, 1);
	KTAP_EXPECT_EQ(h->ends, 1);
	hook_free(h);

	/* size 0 (a zeroed sink from before the hooks): they are not read. */
	h = hook_new(&info);
	h->sink.size = 0;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), 0);
	KTAP_EXPECT_EQ(h->begins + h->ends, 0);
	hook_free(h);

	/* A larger struct with a zero tail is fine; any other size or a flag
	 * is refused before anything happens. */
	h = hook_new(&info);
	h->sink.size = sizeof(h->sink) + sizeof(h->tail);
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), 0);
	KTAP_EXPECT_EQ(h->begins, 1);
	h->begins = 0;
	h->tail[5] = 1;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), -EINVAL);
	haccel_last_error(ctx, err, sizeof(err));
	KTAP_EXPECT(strstr(err, "does not know") != NULL);
	h->tail[5] = 0;
	h->sink.size = 3;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), -EINVAL);
	h->sink.size = sizeof(h->sink);
	h->sink.flags = 1;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &h->sink, &st), -EINVAL);
	haccel_last_error(ctx, err, sizeof(err));
	KTAP_EXPECT(strstr(err, "unknown sink flags") != NULL);
	KTAP_EXPECT_EQ(h->begins, 0);
	hook_free(h);

	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/*
 * A buffered load through staging caps its reads (haccel.h,
 * HACCEL_LOAD_AS_GIVEN): 4 MiB x 32 asked becomes 2 MiB x 8 (16 buffers),
 * 1 MiB x 32 becomes 1 MiB x 16; small reads and shallow queues stay; the
 * flag keeps what was asked, and direct loads are never capped. Every
 * byte arrives each time.
 */
static void t_staged_buffered_cap(void)
{
	static struct st_tensor big[] = {
		ST_T("a.big", "U8", 0, 0, 40 * 1048576 + 3),
		ST_T("b.odd", "U8", 0, 0, 4097),
	};
	static const struct {
		uint32_t flags, chunk, qd, want_chunk, want_bufs;
	} cases[] = {
		{ HACCEL_LOAD_BUFFERED, 4u << 20, 32, 2u << 20, 16 },
		{ HACCEL_LOAD_BUFFERED, 1u << 20, 32, 1u << 20, 32 },
		{ HACCEL_LOAD_BUFFERED, 64u << 10, 4, 64u << 10, 8 },
		{ HACCEL_LOAD_BUFFERED | HACCEL_LOAD_AS_GIVEN, 4u << 20, 32, 4u << 20, 11 },
		{ HACCEL_LOAD_DIRECT, 4u << 20, 32, 4u << 20, 11 },
	};
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH];
	struct st_spec s = { .tensors = big, .n = 2 };
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_weights *w;

	st_pack(big, 2);
	st_write(st_join(path, dir, "big.safetensors"), &s);
	w = ST_OPEN(ctx, path);
	haccel_weights_info(w, &info);
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hook_sink *h = hook_new(&info);

		haccel_load_params_init(&p);
		p.flags = cases[i].flags;
		p.chunk_bytes = cases[i].chunk;
		p.queue_depth = cases[i].qd;
		KTAP_ASSERT_EQ(haccel_load(w, &p, &h->sink, &st), 0);
		ktap_diag("flags 0x%x, %u KiB x %u asked: %u buffers of %llu KiB", cases[i].flags,
			  cases[i].chunk >> 10, cases[i].qd, h->b.n_buf,
			  (unsigned long long)h->b.buf_bytes >> 10);
		if ((cases[i].flags & HACCEL_LOAD_DIRECT) && !st.direct) {
			/* No O_DIRECT on this filesystem: the load went
			 * buffered (warned), so it is capped like one. */
			ktap_diag("no direct I/O here: the direct case was read buffered");
			KTAP_EXPECT_EQ(h->b.buf_bytes, 2u << 20);
			KTAP_EXPECT_EQ(h->b.n_buf, 16);
		} else {
			KTAP_EXPECT_EQ(h->b.buf_bytes, cases[i].want_chunk);
			KTAP_EXPECT_EQ(h->b.n_buf, cases[i].want_bufs);
		}
		st_expect_tensors(w, h->dest, "capped staging");
		hook_free(h);
	}
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

static void t_bad_params(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH];
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_host_sink sink;
	struct haccel_weights *w;
	uint8_t *dest;

	write_mixed(st_join(path, dir, "model.safetensors"), 0, -1);
	w = ST_OPEN(ctx, path);
	haccel_weights_info(w, &info);
	dest = malloc(info.dest_bytes);
	haccel_host_sink_init(&sink, dest, info.dest_bytes);
#define BAD(stmt)                                                           \
	do {                                                                \
		haccel_load_params_init(&p);                                \
		stmt;                                                       \
		KTAP_EXPECT_EQ(haccel_load(w, &p, &sink.sink, NULL), -EINVAL); \
	} while (0)
	BAD(p.flags = 1u << 9);
	BAD(p.flags = HACCEL_LOAD_DIRECT | HACCEL_LOAD_BUFFERED);
	BAD(p.queue_depth = 0);
	BAD(p.threads = 0);
	BAD(p.chunk_bytes = 4096);
	BAD(p.chunk_bytes = (64 << 10) + 1);
	BAD(p.node = -2);
	BAD(p.reserved = 1);
	BAD(p.size = 3);
#undef BAD
	KTAP_EXPECT_EQ(haccel_load(NULL, NULL, &sink.sink, NULL), -EINVAL);
	KTAP_EXPECT_EQ(haccel_load(w, NULL, NULL, NULL), -EINVAL);
	/* A destination too small for the host layout: refused before any
	 * read in every mode (a direct load once failed part-way, -ERANGE). */
	haccel_host_sink_init(&sink, dest, info.dest_bytes - 1);
	for (int mode = 0; mode < 3; mode++) {
		static const uint32_t flags[] = { HACCEL_LOAD_BUFFERED, HACCEL_LOAD_DIRECT, 0 };
		char err[1024];

		haccel_load_params_init(&p);
		p.flags = flags[mode];
		memset(&st, 0, sizeof(st));
		KTAP_EXPECT_EQ(haccel_load(w, &p, &sink.sink, &st), -EINVAL);
		haccel_last_error(ctx, err, sizeof(err));
		KTAP_EXPECT(strstr(err, "smaller than") != NULL);
		KTAP_EXPECT_EQ(st.read_bytes, 0);
	}
	/* Defaults (p == NULL) and a node binding work. */
	haccel_host_sink_init(&sink, dest, info.dest_bytes);
	KTAP_EXPECT_EQ(haccel_load(w, NULL, &sink.sink, NULL), 0);
	haccel_load_params_init(&p);
	p.node = 0;
	KTAP_EXPECT_EQ(haccel_load(w, &p, &sink.sink, NULL), 0);
	free(dest);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/* Each load that reads with the pool says why in exactly one line: a
 * warning when the environment or the kernel decided, info when the
 * caller's own flag asked. */
static void t_forced_and_refused_io_uring(void)
{
	struct log_cap lc;
	struct haccel_ctx *ctx = cap_ctx(&lc);
	char *dir = load_tmpdir(), path[ST_PATH];
	struct haccel_weights *w;
	uint8_t *dest;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	w = ST_OPEN(ctx, path);
	setenv("HACCEL_FORCE_PREAD", "1", 1);
	lc.n = 0;
	KTAP_ASSERT_EQ(load_into(w, HACCEL_LOAD_VERIFY, 8, 64 << 10, &dest), 0);
	KTAP_EXPECT_EQ(st.io_path, HACCEL_IO_PREAD);
	KTAP_EXPECT(strstr(st.fallback_reason, "HACCEL_FORCE_PREAD") != NULL);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "pread"), 1);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "HACCEL_FORCE_PREAD"), 1);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_INFO, "pread"), 0);
	st_expect_tensors(w, dest, "forced pread");
	free(dest);
	unsetenv("HACCEL_FORCE_PREAD");

	lc.n = 0;
	KTAP_ASSERT_EQ(load_into(w, HACCEL_LOAD_VERIFY | HACCEL_LOAD_PREAD, 8, 64 << 10, NULL), 0);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_INFO, "HACCEL_LOAD_PREAD"), 1);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, NULL), 0);

	/* The kernel refuses io_uring_setup (as seccomp or
	 * kernel.io_uring_disabled would): the pool takes over, bytes equal. */
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		haccel_weights_close(w);
		st_rmtree(dir);
		haccel_close(ctx);
		ktap_skip("cannot install a seccomp filter here: %s", strerror(errno));
	}
	lc.n = 0;
	KTAP_ASSERT_EQ(load_into(w, HACCEL_LOAD_VERIFY, 8, 64 << 10, &dest), 0);
	KTAP_EXPECT_EQ(st.io_path, HACCEL_IO_PREAD);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "io_uring refused"), 1);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, NULL), 1);
	KTAP_EXPECT(strstr(st.fallback_reason, "io_uring refused") != NULL);
	KTAP_EXPECT(strstr(st.fallback_reason, "Operation not permitted") != NULL);
	KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
	st_expect_tensors(w, dest, "refused io_uring");
	free(dest);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/* A sink whose wait() or put() fails on its second call. */
struct failing_sink {
	struct haccel_sink sink;
	uint8_t *dest;
	int fail_wait, fail_put; /* which fails */
	int waits, puts;
	const char *truncate;    /* begin(): truncate this file to 6000 bytes */
};

static int failing_put(void *user, uint32_t tensor, uint64_t toff, uint64_t doff,
		       const void *src, uint64_t n, uint32_t buf)
{
	struct failing_sink *f = user;

	(void)tensor;
	(void)toff;
	(void)buf;
	if (++f->puts == 2 && f->fail_put)
		return -EPIPE;
	memcpy(f->dest + doff, src, n);
	return 0;
}

static int failing_wait(void *user, uint32_t buf)
{
	struct failing_sink *f = user;

	(void)buf;
	return ++f->waits == 2 && f->fail_wait ? -ENOSPC : 0;
}

static int failing_begin(void *user, const struct haccel_sink_begin *b)
{
	struct failing_sink *f = user;

	(void)b;
	return f->truncate && truncate(f->truncate, 6000) ? -errno : 0;
}

/* Run the load with f, on io_uring (pool 0) or the pread pool (pool 1,
 * through HACCEL_FORCE_PREAD as a user would force it). */
static int failing_load(struct haccel_weights *w, struct failing_sink *f, int pool)
{
	struct haccel_weights_info info;
	struct haccel_load_params p;
	int ret;

	haccel_weights_info(w, &info);
	f->dest = calloc(1, info.dest_bytes + 1);
	KTAP_ASSERT(f->dest != NULL);
	f->sink.user = f;
	f->sink.put = failing_put;
	f->sink.wait = failing_wait;
	f->sink.size = sizeof(f->sink);
	f->sink.begin = failing_begin;
	haccel_load_params_init(&p);
	p.flags = HACCEL_LOAD_DIRECT;
	p.queue_depth = 4;
	p.chunk_bytes = 64 << 10;
	p.threads = 2;
	if (pool)
		setenv("HACCEL_FORCE_PREAD", "1", 1);
	memset(&st, 0, sizeof(st));
	ret = haccel_load(w, &p, &f->sink, &st);
	unsetenv("HACCEL_FORCE_PREAD");
	KTAP_EXPECT_EQ(st.io_path, pool ? HACCEL_IO_PREAD : HACCEL_IO_URING);
	free(f->dest);
	return ret;
}

/*
 * A sink that fails while reads are queued: the load returns the sink's
 * error at once. It once hung on io_uring: run() failed right after
 * queueing a read that was never submitted, and the wait for its
 * completion never ended (the case's timeout catches that).
 */
static void t_sink_failure_returns_promptly(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], err[1024];
	struct failing_sink f;
	struct haccel_weights *w;

	write_mixed(st_join(path, dir, "model.safetensors"), 0, -1);
	w = ST_OPEN(ctx, path);
	for (int pool = 0; pool < 2; pool++) {
		memset(&f, 0, sizeof(f));
		f.fail_wait = 1;
		KTAP_EXPECT_EQ(failing_load(w, &f, pool), -ENOSPC);
		haccel_last_error(ctx, err, sizeof(err));
		ktap_diag("%s: %s", pool ? "pool" : "io_uring", err);
		KTAP_EXPECT(strstr(err, "sink wait") != NULL);
		KTAP_EXPECT_EQ(f.waits, 2);

		memset(&f, 0, sizeof(f));
		f.fail_put = 1;
		KTAP_EXPECT_EQ(failing_load(w, &f, pool), -EPIPE);
		haccel_last_error(ctx, err, sizeof(err));
		KTAP_EXPECT(strstr(err, "sink refused") != NULL);
		KTAP_EXPECT_EQ(f.puts, 2);
	}
	/* The same checkpoint still loads (nothing left behind). */
	KTAP_EXPECT_EQ(load_into(w, HACCEL_LOAD_DIRECT, 4, 64 << 10, NULL), 0);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/*
 * A retried read queued, then an error in the same batch of completions:
 * with HACCEL_TEST_EAGAIN chunk 0's first attempt is a no-op reported as
 * -EAGAIN and resubmitted; the file was cut to 6000 bytes once the load
 * began, so chunk 1's read ends at end of file, right behind it. The load
 * fails promptly, saying so, on io_uring (where it once hung) and the pool.
 */
static void t_retry_then_error_returns_promptly(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], err[1024];
	struct failing_sink f;
	struct haccel_weights *w;

	write_mixed(st_join(path, dir, "model.safetensors"), 0, -1);
	setenv("HACCEL_TEST_EAGAIN", "1", 1);
	for (int pool = 0; pool < 2; pool++) {
		w = ST_OPEN(ctx, path);
		memset(&f, 0, sizeof(f));
		f.truncate = path;
		KTAP_EXPECT_EQ(failing_load(w, &f, pool), -EBADMSG);
		haccel_last_error(ctx, err, sizeof(err));
		ktap_diag("%s: %s", pool ? "pool" : "io_uring", err);
		KTAP_EXPECT(strstr(err, "truncated") || strstr(err, "changed"));
		KTAP_EXPECT(st.retries >= 1);
		haccel_weights_close(w);
		write_mixed(path, 0, -1);
	}
	unsetenv("HACCEL_TEST_EAGAIN");
	st_rmtree(dir);
	haccel_close(ctx);
}

/*
 * Short reads and retries, provoked with the test knobs on every path:
 * the bytes are still exact and the checksums match, and the stats count
 * them (the kernel gives neither on demand).
 */
static void t_short_reads_and_retries(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH], what[160];
	static const uint32_t modes[] = {
		HACCEL_LOAD_DIRECT, HACCEL_LOAD_BUFFERED,
		HACCEL_LOAD_DIRECT | HACCEL_LOAD_PREAD, HACCEL_LOAD_BUFFERED | HACCEL_LOAD_PREAD,
	};
	static const char *const knobs[] = { "HACCEL_TEST_SHORT_READS", "HACCEL_TEST_EAGAIN" };
	struct haccel_weights *w;
	uint8_t *dest;

	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	w = ST_OPEN(ctx, path);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		/* Without the knobs, nothing to count on a local file. */
		KTAP_ASSERT_EQ(load_into(w, modes[m] | HACCEL_LOAD_VERIFY, 4, 64 << 10, NULL), 0);
		KTAP_EXPECT_EQ(st.short_reads + st.retries, 0);
		for (int k = 0; k < 3; k++) { /* short, eagain, both */
			if (k != 1)
				setenv(knobs[0], "1", 1);
			if (k != 0)
				setenv(knobs[1], "1", 1);
			snprintf(what, sizeof(what), "flags %#x, %s", modes[m],
				 k == 0 ? "short reads" : k == 1 ? "retries" : "both");
			KTAP_ASSERT_EQ(load_into(w, modes[m] | HACCEL_LOAD_VERIFY, 4, 64 << 10, &dest), 0);
			unsetenv(knobs[0]);
			unsetenv(knobs[1]);
			ktap_diag("%s: %llu short reads, %llu retries, %s", what,
				  (unsigned long long)st.short_reads,
				  (unsigned long long)st.retries, st.direct ? "direct" : "buffered");
			st_expect_tensors(w, dest, what);
			free(dest);
			KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
			if (k != 1)
				KTAP_EXPECT(st.short_reads >= 10); /* one per chunk, 50 chunks */
			else
				KTAP_EXPECT_EQ(st.short_reads, 0);
			if (k != 0)
				KTAP_EXPECT(st.retries >= 10);     /* every even chunk */
			else
				KTAP_EXPECT_EQ(st.retries, 0);
			if (ktap_failures())
				break;
		}
	}
	/* Through staging to a sink without a host layout, too. */
	setenv(knobs[0], "1", 1);
	setenv(knobs[1], "1", 1);
	for (int mode = 0; mode < 2; mode++) {
		struct haccel_weights_info info;
		struct haccel_load_params p;
		struct async_sink a;

		haccel_weights_info(w, &info);
		memset(&a, 0, sizeof(a));
		a.dest = calloc(1, info.dest_bytes);
		a.sink.user = &a;
		a.sink.put = async_put;
		a.sink.wait = async_wait;
		haccel_load_params_init(&p);
		p.flags = HACCEL_LOAD_VERIFY | (mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT);
		p.queue_depth = 4;
		p.chunk_bytes = 64 << 10;
		KTAP_EXPECT_EQ(haccel_load(w, &p, &a.sink, &st), 0);
		KTAP_EXPECT(st.short_reads >= 10 && st.retries >= 10);
		st_expect_tensors(w, a.dest, mode ? "staged buffered, knobs" : "staged direct, knobs");
		free(a.dest);
	}
	unsetenv(knobs[0]);
	unsetenv(knobs[1]);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

/* A filesystem without O_DIRECT: asked for direct reads, the load reads
 * buffered and says so in one warning. */
static void t_no_direct_io_warns(void)
{
	struct log_cap lc;
	struct haccel_ctx *ctx;
	char dir[] = "/dev/shm/haccel-load-XXXXXX", path[ST_PATH];
	struct haccel_weights *w;
	uint8_t *dest;
	int fd;

	if (!mkdtemp(dir))
		ktap_skip("no /dev/shm here: %s", strerror(errno));
	st_join(path, dir, "probe");
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		close(fd);
		unlink(path);
		rmdir(dir);
		ktap_skip("tmpfs here has O_DIRECT (Linux 6.6+): no filesystem without it to try");
	}
	ctx = cap_ctx(&lc);
	write_mixed(st_join(path, dir, "model.safetensors"), 1, -1);
	w = ST_OPEN(ctx, path);
	lc.n = 0;
	KTAP_ASSERT_EQ(load_into(w, HACCEL_LOAD_DIRECT | HACCEL_LOAD_VERIFY, 4, 64 << 10, &dest), 0);
	KTAP_EXPECT_EQ(st.direct, 0);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "no direct I/O"), 1);
	st_expect_tensors(w, dest, "tmpfs");
	free(dest);
	haccel_weights_close(w);
	KTAP_EXPECT_EQ(test_rmtree(dir), 0);
	haccel_close(ctx);
}

static void t_empty_checkpoints(void)
{
	struct haccel_ctx *ctx = st_ctx();
	char *dir = load_tmpdir(), path[ST_PATH];
	struct st_tensor z[] = { ST_T("z0", "F32", 0, 0, 0), ST_T("z1", "F16", 0, 0, 5, 0) };
	struct st_spec none = { 0 }, zeros = { .tensors = z, .n = 2 };
	struct haccel_weights *w;

	st_write(st_join(path, dir, "a.safetensors"), &none);
	w = ST_OPEN(ctx, path);
	KTAP_EXPECT_EQ(load_into(w, HACCEL_LOAD_DIRECT, 8, 64 << 10, NULL), 0);
	KTAP_EXPECT_EQ(st.tensor_bytes, 0);
	haccel_weights_close(w);
	st_write(st_join(path, dir, "b.safetensors"), &zeros);
	w = ST_OPEN(ctx, path);
	KTAP_EXPECT_EQ(load_into(w, HACCEL_LOAD_VERIFY, 8, 64 << 10, NULL), 0);
	KTAP_EXPECT_EQ(st.tensors_unverified, 2);
	haccel_weights_close(w);
	st_rmtree(dir);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_every_path_every_byte),
	KTAP_CASE(t_uring_fresh_dest),
	KTAP_CASE(t_sharded),
	KTAP_CASE(t_checksum_mismatch),
	KTAP_CASE(t_file_changed_before_load),
	KTAP_CASE(t_file_changed_during_load),
	KTAP_CASE(t_async_sink_protocol),
	KTAP_CASE(t_sink_begin_end),
	KTAP_CASE(t_staged_buffered_cap),
	KTAP_CASE(t_bad_params),
	KTAP_CASE(t_forced_and_refused_io_uring),
	KTAP_CASE_TIMEOUT(t_sink_failure_returns_promptly, 20),
	KTAP_CASE_TIMEOUT(t_retry_then_error_returns_promptly, 20),
	KTAP_CASE(t_short_reads_and_retries),
	KTAP_CASE(t_no_direct_io_warns),
	KTAP_CASE(t_empty_checkpoints),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
