// SPDX-License-Identifier: MIT
/* The GPU sink loads every byte of a checkpoint into device memory (direct and buffered, io_uring and pread, staging recycled, registered or not) as the host sink does, refuses a destination too small, and says "no GPU" without one. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "gpu-util.h"
#include "st-writer.h"

/* Beside the build (a real disk, for O_DIRECT), not in a /tmp that may be
 * tmpfs. */
static char *load_tmpdir(void)
{
	char *dir = strdup("./haccel-gpuload-XXXXXX");

	KTAP_ASSERT(dir && mkdtemp(dir));
	return dir;
}

/* Nothing aligned: empty tensors, one byte, 4097, several chunks plus 5,
 * an odd bf16 shape; the file size is no multiple of 4096. */
static struct st_tensor mixed[] = {
	ST_T("a.empty", "F32", 0, 0, 0),
	ST_T("b.one", "U8", 0, 0, 1),
	ST_T("c.odd", "U8", 0, 0, 4097),
	ST_T("d.big", "U8", 0, 0, 3 * 1048576 + 5),
	ST_T("e.bf16", "BF16", 0, 0, 3, 1001),
	ST_T("f.tail_empty", "I8", 0, 0, 0),
};
#define N_MIXED (sizeof(mixed) / sizeof(mixed[0]))

/* __metadata__ with every tensor's checksum (tensor `corrupt` wrong). */
static char *checksum_meta(const struct st_tensor *t, size_t n, int corrupt)
{
	struct st_buf b = { 0 };

	st_puts(&b, "{");
	for (size_t i = 0; i < n; i++) {
		uint64_t len = t[i].end - t[i].begin;
		uint8_t *d = malloc(len + 1);

		KTAP_ASSERT(d != NULL);
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

static void write_mixed(const char *path, int corrupt)
{
	struct st_spec s = { .tensors = mixed, .n = N_MIXED };
	char *meta;

	st_pack(mixed, N_MIXED);
	s.meta = meta = checksum_meta(mixed, N_MIXED, corrupt);
	st_write(path, &s);
	free(meta);
}

static struct haccel_load_stats st;

/* Load w through sink with flags; returns the status. */
static int load(struct haccel_weights *w, const struct haccel_sink *sink, uint32_t flags,
		uint32_t qd, uint32_t chunk)
{
	return st_load(w, sink, flags, qd, chunk, &st);
}

/* The same checkpoint through the host sink, for comparison. */
static uint8_t *load_host(struct haccel_weights *w)
{
	struct haccel_weights_info info;
	struct haccel_host_sink hs;
	uint8_t *dest;

	haccel_weights_info(w, &info);
	dest = calloc(1, info.dest_bytes + 1);
	KTAP_ASSERT(dest != NULL);
	haccel_host_sink_init(&hs, dest, info.dest_bytes);
	KTAP_ASSERT_EQ(load(w, &hs.sink, HACCEL_LOAD_DIRECT, 8, 64 << 10), 0);
	return dest;
}

/* Fill the device destination with a pattern no file byte run matches. */
static void poison(uint64_t dptr, uint64_t bytes)
{
	KTAP_ASSERT(gpu_g->cu->MemsetD8Async(dptr, 0xa5, bytes, gpu_g->stream) == 0);
	gpu_sync();
}

/*
 * Copy the device destination back and compare every tensor with the file
 * (st-writer made data byte k of a file st_data_byte(k)) and with the host
 * sink's load. Returns 1 when all match.
 */
static int expect_device(struct haccel_weights *w, uint64_t dptr, const uint8_t *host,
			 const char *what)
{
	struct haccel_weights_info info;
	uint8_t *got;
	int ok = 1;

	haccel_weights_info(w, &info);
	got = malloc(info.dest_bytes + 1);
	KTAP_ASSERT(got != NULL);
	gpu_down(got, dptr, info.dest_bytes);
	for (uint32_t i = 0; ok && i < info.n_tensors; i++) {
		struct haccel_tensor_info t, f0;

		haccel_weights_tensor(w, i, &t);
		/* The first tensor of a file begins its data region. */
		for (uint32_t k = 0;; k++) {
			haccel_weights_tensor(w, k, &f0);
			if (f0.file == t.file)
				break;
		}
		for (uint64_t k = 0; k < t.bytes; k++)
			if (got[t.dest_offset + k] != st_data_byte(t.file_offset - f0.file_offset + k)) {
				ktap_fail_at(__FILE__, __LINE__, "%s: tensor %s byte %llu: 0x%02x, file has 0x%02x",
					     what, t.name, (unsigned long long)k, got[t.dest_offset + k],
					     st_data_byte(t.file_offset - f0.file_offset + k));
				ok = 0;
				break;
			}
		if (ok && memcmp(got + t.dest_offset, host + t.dest_offset, t.bytes)) {
			ktap_fail_at(__FILE__, __LINE__, "%s: tensor %s differs from the host sink's load",
				     what, t.name);
			ok = 0;
		}
	}
	free(got);
	return ok;
}

static const struct {
	uint32_t flags, qd, chunk;
} runs[] = {
	/* Small chunks and shallow queues: the few staging buffers are
	 * refilled many times while their copies may still be running. */
	{ HACCEL_LOAD_DIRECT, 1, 64 << 10 },
	{ HACCEL_LOAD_DIRECT, 4, 64 << 10 },
	{ HACCEL_LOAD_DIRECT, 32, 64 << 10 },
	{ HACCEL_LOAD_DIRECT, 2, 4 << 20 },
	{ HACCEL_LOAD_DIRECT | HACCEL_LOAD_PREAD, 8, 64 << 10 },
	{ HACCEL_LOAD_BUFFERED, 1, 64 << 10 },
	{ HACCEL_LOAD_BUFFERED, 8, 128 << 10 },
	{ HACCEL_LOAD_BUFFERED | HACCEL_LOAD_PREAD, 4, 64 << 10 },
	{ 0, 16, 128 << 10 }, /* automatic mode */
};

/* Every run through one sink: the sink's own memory, then the caller's. */
static void t_every_path_every_byte(void)
{
	char *dir, path[ST_PATH], what[160];
	struct haccel_gpu_sink_params gp;
	struct haccel_gpu_sink_info gi;
	struct haccel_hostmem_stats hm0, hm1;
	struct haccel_weights_info info;
	struct haccel_gpu_sink *gs;
	struct haccel_weights *w;
	uint8_t *host;

	gpu_open();
	dir = load_tmpdir();
	write_mixed(st_join(path, dir, "model.safetensors"), -1);
	w = ST_OPEN(gpu_ctx, path);
	haccel_weights_info(w, &info);
	host = load_host(w);
	haccel_hostmem_stats(gpu_ctx, &hm0);
	for (int own = 0; own < 2; own++) {
		uint64_t copied = 0, most = 0;

		haccel_gpu_sink_params_init(&gp);
		gp.bytes = info.dest_bytes;
		if (own) {
			gp.dptr = gpu_alloc(info.dest_bytes);
			gpu_sync();
		}
		KTAP_ASSERT_EQ(haccel_gpu_sink_create(gpu_ctx, &gp, &gs), 0);
		KTAP_ASSERT_EQ(haccel_gpu_sink_info(gs, &gi), 0);
		KTAP_EXPECT_EQ(gi.owned, !own);
		KTAP_EXPECT(gi.dptr != 0);
		if (own)
			KTAP_EXPECT_EQ(gi.dptr, gp.dptr);
		for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
			snprintf(what, sizeof(what), "%s destination, flags %#x depth %u chunk %u",
				 own ? "caller's" : "sink's", runs[r].flags, runs[r].qd, runs[r].chunk);
			poison(gi.dptr, info.dest_bytes);
			int ret = load(w, haccel_gpu_sink_sink(gs), runs[r].flags | HACCEL_LOAD_VERIFY,
				       runs[r].qd, runs[r].chunk);
			if (ret) {
				char err[1024];

				haccel_last_error(gpu_ctx, err, sizeof(err));
				ktap_diag("%s: %s", what, err);
			}
			KTAP_ASSERT_EQ(ret, 0);
			KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
			KTAP_EXPECT_EQ(st.tensor_bytes, info.tensor_bytes);
			expect_device(w, gi.dptr, host, what);
			KTAP_ASSERT_EQ(haccel_gpu_sink_info(gs, &gi), 0);
			copied += info.tensor_bytes;
			/* The chunks holding data: the file's one data region of
			 * tensor_bytes cut on a grid of the chunk size (direct
			 * reads start it at an aligned offset: one chunk more at
			 * most); buffered reads cap chunks at
			 * HACCEL_LOAD_STAGED_CHUNK, and direct ones may fall back
			 * to buffered. */
			uint64_t chunk = runs[r].chunk < HACCEL_LOAD_STAGED_CHUNK ?
						 runs[r].chunk : HACCEL_LOAD_STAGED_CHUNK;
			most += (info.tensor_bytes + chunk - 1) / chunk + 1;
			KTAP_EXPECT_EQ(gi.copy_bytes, copied);
			KTAP_EXPECT_EQ(gi.loads, r + 1);
			if (!gi.registered)
				ktap_diag("%s: staging not registered: %s", what, gi.fallback_reason);
			KTAP_EXPECT(gi.registered || getenv("HACCEL_FORCE_UNREGISTERED"));
			if (ktap_failures()) {
				ktap_diag("failed run: %s", what);
				break;
			}
		}
		/* One copy per chunk at most, not one per tensor piece. */
		ktap_diag("%s destination: %llu copies (at most %llu), %llu bytes, %.3f ms waiting",
			  own ? "caller's" : "sink's", (unsigned long long)gi.copies,
			  (unsigned long long)most, (unsigned long long)gi.copy_bytes,
			  gi.wait_ns / 1e6);
		KTAP_EXPECT(gi.copies > 0 && gi.copies <= most);
		haccel_gpu_sink_destroy(gs);
	}
	haccel_hostmem_stats(gpu_ctx, &hm1);
	if (!getenv("HACCEL_FORCE_UNREGISTERED"))
		KTAP_EXPECT(hm1.cuda_registrations >= hm0.cuda_registrations + 2 * sizeof(runs) / sizeof(runs[0]));
	free(host);
	haccel_weights_close(w);
	st_rmtree(dir);
	gpu_close();
}

/* Three shards of odd sizes, through an index: each file's region lands at
 * its 4 KiB boundary in device memory. */
static void t_sharded(void)
{
	struct st_tensor a[] = { ST_T("x", "U8", 0, 0, 5000), ST_T("y", "U8", 0, 0, 3) };
	struct st_tensor b[] = { ST_T("z", "U8", 0, 0, 70001) };
	struct st_tensor c[] = { ST_T("u", "BF16", 0, 0, 333, 7), ST_T("v", "U8", 0, 0, 1) };
	struct st_spec sa = { .tensors = a, .n = 2 }, sb = { .tensors = b, .n = 1 },
		       sc = { .tensors = c, .n = 2 };
	struct haccel_gpu_sink_params gp;
	struct haccel_gpu_sink_info gi;
	struct haccel_weights_info info;
	struct haccel_gpu_sink *gs;
	struct haccel_weights *w;
	char *dir, path[ST_PATH];
	uint8_t *host;

	gpu_open();
	dir = load_tmpdir();
	st_pack(a, 2);
	st_pack(b, 1);
	st_pack(c, 2);
	st_write(st_join(path, dir, "m-1.safetensors"), &sa);
	st_write(st_join(path, dir, "m-2.safetensors"), &sb);
	st_write(st_join(path, dir, "m-3.safetensors"), &sc);
	st_write_text(st_join(path, dir, "model.safetensors.index.json"),
		      "{\"metadata\":{},\"weight_map\":{\"x\":\"m-1.safetensors\","
		      "\"y\":\"m-1.safetensors\",\"z\":\"m-2.safetensors\","
		      "\"u\":\"m-3.safetensors\",\"v\":\"m-3.safetensors\"}}");
	w = ST_OPEN(gpu_ctx, dir);
	haccel_weights_info(w, &info);
	KTAP_ASSERT_EQ(info.n_files, 3);
	host = load_host(w);
	haccel_gpu_sink_params_init(&gp);
	gp.bytes = info.dest_bytes + 12345; /* larger than needed is fine */
	KTAP_ASSERT_EQ(haccel_gpu_sink_create(gpu_ctx, &gp, &gs), 0);
	haccel_gpu_sink_info(gs, &gi);
	for (int mode = 0; mode < 4; mode++) {
		uint32_t f = (mode & 1 ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT) |
			     (mode & 2 ? HACCEL_LOAD_PREAD : 0);

		poison(gi.dptr, info.dest_bytes);
		KTAP_ASSERT_EQ(load(w, haccel_gpu_sink_sink(gs), f, 2, 64 << 10), 0);
		KTAP_EXPECT_EQ(st.tensor_bytes, info.tensor_bytes);
		expect_device(w, gi.dptr, host, mode & 1 ? "sharded buffered" : "sharded direct");
	}
	haccel_gpu_sink_destroy(gs);
	free(host);
	haccel_weights_close(w);
	st_rmtree(dir);
	gpu_close();
}

/* Registration refused (forced here): unregistered copies, same bytes. */
static void t_unregistered_staging(void)
{
	struct haccel_gpu_sink_params gp;
	struct haccel_gpu_sink_info gi;
	struct haccel_weights_info info;
	struct haccel_gpu_sink *gs;
	struct haccel_weights *w;
	char *dir, path[ST_PATH];
	uint8_t *host;

	gpu_open();
	dir = load_tmpdir();
	write_mixed(st_join(path, dir, "model.safetensors"), -1);
	w = ST_OPEN(gpu_ctx, path);
	haccel_weights_info(w, &info);
	host = load_host(w);
	haccel_gpu_sink_params_init(&gp);
	gp.bytes = info.dest_bytes;
	KTAP_ASSERT_EQ(haccel_gpu_sink_create(gpu_ctx, &gp, &gs), 0);
	haccel_gpu_sink_info(gs, &gi);
	setenv("HACCEL_FORCE_UNREGISTERED", "1", 1);
	for (int mode = 0; mode < 2; mode++) {
		poison(gi.dptr, info.dest_bytes);
		KTAP_ASSERT_EQ(load(w, haccel_gpu_sink_sink(gs),
				    HACCEL_LOAD_VERIFY | (mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT),
				    2, 64 << 10), 0);
		KTAP_EXPECT_EQ(st.tensors_verified, N_MIXED);
		expect_device(w, gi.dptr, host, mode ? "unregistered buffered" : "unregistered direct");
		haccel_gpu_sink_info(gs, &gi);
		KTAP_EXPECT_EQ(gi.registered, 0);
		KTAP_EXPECT_EQ(gi.registered_bytes, 0);
		KTAP_EXPECT(strstr(gi.fallback_reason, "HACCEL_FORCE_UNREGISTERED") != NULL);
	}
	unsetenv("HACCEL_FORCE_UNREGISTERED");
	/* And registered again on the next load. */
	KTAP_ASSERT_EQ(load(w, haccel_gpu_sink_sink(gs), HACCEL_LOAD_DIRECT, 2, 64 << 10), 0);
	haccel_gpu_sink_info(gs, &gi);
	KTAP_EXPECT_EQ(gi.registered, 1);
	KTAP_EXPECT_EQ(gi.fallback_reason[0], '\0');
	haccel_gpu_sink_destroy(gs);
	free(host);
	haccel_weights_close(w);
	st_rmtree(dir);
	gpu_close();
}

/* A destination one byte short: refused before any byte moves, with both
 * sizes in the message; the sink stays usable. */
static void t_destination_too_small(void)
{
	struct haccel_gpu_sink_params gp;
	struct haccel_gpu_sink_info gi;
	struct haccel_weights_info info;
	struct haccel_gpu_sink *gs;
	struct haccel_weights *w;
	char *dir, path[ST_PATH], err[1024], want[64];

	gpu_open();
	dir = load_tmpdir();
	write_mixed(st_join(path, dir, "model.safetensors"), -1);
	w = ST_OPEN(gpu_ctx, path);
	haccel_weights_info(w, &info);
	for (int own = 0; own < 2; own++) {
		haccel_gpu_sink_params_init(&gp);
		gp.bytes = info.dest_bytes - 1;
		if (own) {
			gp.dptr = gpu_alloc(gp.bytes);
			gpu_sync();
		}
		KTAP_ASSERT_EQ(haccel_gpu_sink_create(gpu_ctx, &gp, &gs), 0);
		for (int mode = 0; mode < 2; mode++) {
			KTAP_EXPECT_EQ(load(w, haccel_gpu_sink_sink(gs),
					    mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT, 4, 64 << 10),
				       -EINVAL);
			haccel_last_error(gpu_ctx, err, sizeof(err));
			ktap_diag("%s", err);
			snprintf(want, sizeof(want), "destination of %llu bytes",
				 (unsigned long long)gp.bytes);
			KTAP_EXPECT(strstr(err, want) != NULL);
			snprintf(want, sizeof(want), "%llu bytes", (unsigned long long)info.dest_bytes);
			KTAP_EXPECT(strstr(err, want) != NULL);
			KTAP_EXPECT_EQ(st.read_bytes, 0);
		}
		haccel_gpu_sink_info(gs, &gi);
		KTAP_EXPECT_EQ(gi.loads, 0);
		KTAP_EXPECT_EQ(gi.copy_bytes, 0);
		haccel_gpu_sink_destroy(gs);
	}
	haccel_weights_close(w);
	st_rmtree(dir);
	gpu_close();
}

/* HACCEL_LOAD_VERIFY checks the bytes on their way to the device; a failed
 * load leaves the sink ready for the next one. */
static void t_verify(void)
{
	struct haccel_gpu_sink_params gp;
	struct haccel_gpu_sink_info gi;
	struct haccel_weights_info info;
	struct haccel_gpu_sink *gs;
	struct haccel_weights *w;
	char *dir, path[ST_PATH], err[1024];
	uint8_t *host;

	gpu_open();
	dir = load_tmpdir();
	write_mixed(st_join(path, dir, "model.safetensors"), 3);
	w = ST_OPEN(gpu_ctx, path);
	haccel_weights_info(w, &info);
	haccel_gpu_sink_params_init(&gp);
	gp.bytes = info.dest_bytes;
	KTAP_ASSERT_EQ(haccel_gpu_sink_create(gpu_ctx, &gp, &gs), 0);
	haccel_gpu_sink_info(gs, &gi);
	for (int mode = 0; mode < 2; mode++) {
		KTAP_EXPECT_EQ(load(w, haccel_gpu_sink_sink(gs),
				    HACCEL_LOAD_VERIFY | (mode ? HACCEL_LOAD_BUFFERED : HACCEL_LOAD_DIRECT),
				    4, 64 << 10), -EBADMSG);
		haccel_last_error(gpu_ctx, err, sizeof(err));
		ktap_diag("%s", err);
		KTAP_EXPECT(strstr(err, "d.big") && strstr(err, "checksum mismatch"));
	}
	/* Without VERIFY the same file loads, and every byte is right. */
	host = load_host(w);
	poison(gi.dptr, info.dest_bytes);
	KTAP_ASSERT_EQ(load(w, haccel_gpu_sink_sink(gs), HACCEL_LOAD_DIRECT, 4, 64 << 10), 0);
	KTAP_EXPECT_EQ(st.tensors_verified + st.tensors_unverified, 0);
	expect_device(w, gi.dptr, host, "after failed loads");
	haccel_gpu_sink_destroy(gs);
	free(host);
	haccel_weights_close(w);
	st_rmtree(dir);
	gpu_close();
}

/* Parameters are checked before the GPU is touched: these hold anywhere. */
static void t_bad_params(void)
{
	struct haccel_ctx *ctx = st_ctx();
	struct {
		struct haccel_gpu_sink_params p;
		uint64_t extra;
	} big;
	struct haccel_gpu_sink_params p;
	struct haccel_gpu_sink_info gi;
	struct haccel_gpu_sink *gs = (struct haccel_gpu_sink *)1;

	haccel_gpu_sink_params_init(&p);
	KTAP_EXPECT_EQ(p.size, sizeof(p));
	KTAP_EXPECT_EQ(p.dptr, 0);
	KTAP_EXPECT_EQ(p.bytes, 0);
	p.bytes = 4096;
	KTAP_EXPECT_EQ(haccel_gpu_sink_create(NULL, &p, &gs), -EINVAL);
	KTAP_EXPECT_EQ(haccel_gpu_sink_create(ctx, NULL, &gs), -EINVAL);
	KTAP_EXPECT_EQ(haccel_gpu_sink_create(ctx, &p, NULL), -EINVAL);
#define BAD(stmt)                                                               \
	do {                                                                    \
		haccel_gpu_sink_params_init(&p);                                \
		p.bytes = 4096;                                                 \
		stmt;                                                           \
		gs = (struct haccel_gpu_sink *)1;                               \
		KTAP_EXPECT_EQ(haccel_gpu_sink_create(ctx, &p, &gs), -EINVAL);  \
		KTAP_EXPECT(gs == NULL);                                        \
	} while (0)
	BAD(p.bytes = 0);
	BAD(p.flags = 1);
	BAD(p.size = 3);
	BAD(p.size = 16);
#undef BAD
	/* A newer caller's larger struct: refused when it sets what this
	 * library does not know. */
	memset(&big, 0, sizeof(big));
	haccel_gpu_sink_params_init(&big.p);
	big.p.size = sizeof(big);
	big.p.bytes = 4096;
	big.extra = 1;
	KTAP_EXPECT_EQ(haccel_gpu_sink_create(ctx, &big.p, &gs), -EINVAL);
	haccel_gpu_sink_destroy(NULL);
	KTAP_EXPECT(haccel_gpu_sink_sink(NULL) == NULL);
	KTAP_EXPECT_EQ(haccel_gpu_sink_info(NULL, &gi), -EINVAL);
	haccel_close(ctx);
}

/* Without a GPU the API says so: -ENODEV (or -ENOSYS for a driver too old)
 * with the reason, the same one haccel_gpu_info() gives. */
static void t_no_gpu(void)
{
	struct haccel_ctx *ctx = st_ctx();
	struct haccel_gpu_sink_params p;
	struct haccel_gpu_info info;
	struct haccel_gpu_sink *gs = (struct haccel_gpu_sink *)1;
	char err[1024];
	int expect, ret;

	expect = haccel_gpu_info(ctx, &info);
	if (!expect) {
		ktap_diag("%s at %s", info.name, info.pci_bus_id);
		haccel_close(ctx);
		ktap_skip("GPU present");
	}
	KTAP_EXPECT(expect == -ENODEV || expect == -ENOSYS);
	haccel_gpu_sink_params_init(&p);
	p.bytes = 1 << 20;
	ret = haccel_gpu_sink_create(ctx, &p, &gs);
	haccel_last_error(ctx, err, sizeof(err));
	ktap_diag("%s", err);
	KTAP_EXPECT_EQ(ret, expect);
	KTAP_EXPECT(gs == NULL);
	KTAP_EXPECT(strstr(err, "gpu sink: no GPU") != NULL);
	KTAP_EXPECT(info.reason[0] && strstr(err, info.reason) != NULL);
	/* A caller's own device address changes nothing. */
	p.dptr = 1 << 20;
	KTAP_EXPECT_EQ(haccel_gpu_sink_create(ctx, &p, &gs), expect);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_bad_params),
	KTAP_CASE(t_no_gpu),
	KTAP_CASE_TIMEOUT(t_every_path_every_byte, 120),
	KTAP_CASE(t_sharded),
	KTAP_CASE(t_unregistered_staging),
	KTAP_CASE(t_destination_too_small),
	KTAP_CASE(t_verify),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
