// SPDX-License-Identifier: MIT
/* The weight-streaming path through the library: haccel_load() of a safetensors file with io_uring O_DIRECT reads into staging pinned by haccel.ko (bytes exact, the driver charging the staging while loading), and a load over quota refused or, when allowed, unpinned. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haccel.h"
#include "st-writer.h"
#include "driver-util.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define CHUNK (256 * KIB)
#define QD 2
/* The loader takes twice the queue depth in staging buffers. */
#define STAGING (2 * QD * CHUNK)

static const char *checkpoint(void)
{
	const char *p = getenv("HACCEL_VM_CHECKPOINT");

	return p ? p : "/mnt/data/model.safetensors";
}

/* Odd sizes, so reads and tensors straddle chunks and pages. */
static struct st_tensor tensors[] = {
	ST_T("embed", "BF16", 0, 0, 1024, 1024),
	ST_T("layers.0.w", "F32", 0, 0, 333, 1001),
	ST_T("layers.0.bias", "F32", 0, 0, 7),
	ST_T("layers.1.w", "U8", 0, 0, 3000001),
	ST_T("norm", "F16", 0, 0, 4097),
};

/* Host side of the VM runner: write the checkpoint onto the data disk. */
static int write_checkpoint(const char *path)
{
	struct st_spec s = { .tensors = tensors, .n = sizeof(tensors) / sizeof(tensors[0]) };

	st_pack(tensors, s.n);
	return st_write(path, &s) > 0 ? 0 : 1;
}

struct probe_sink {
	struct haccel_sink sink;
	struct haccel_ctx *ctx;
	int fd;                    /* the test's own driver file */
	unsigned char *dest;
	uint64_t dest_bytes;
	uint64_t base_total, base_node0;
	/* What begin() saw, with the staging buffers made and not yet freed. */
	int began;
	uint64_t staging_bytes;
	uint64_t driver_total, driver_node0, ctx_bytes;
	int provider;
	uint64_t puts;
};

static int p_begin(void *user, const struct haccel_sink_begin *b)
{
	struct probe_sink *s = user;
	struct haccel_hostmem_provider_stats ps = { .size = sizeof(ps) };
	struct haccel_driver_stats ds = { .size = sizeof(ds) };
	struct hd_stats st;

	s->began = 1;
	s->staging_bytes = (uint64_t)b->n_buf * b->buf_bytes;
	hd_stats(s->fd, &st);
	s->driver_total = st.s.node_total;
	s->driver_node0 = st.node[0];
	if (haccel_driver_stats(s->ctx, &ds, NULL, 0) > 0)
		s->ctx_bytes = ds.client_bytes;
	if (haccel_hostmem_provider_stats(s->ctx, &ps) == 0 && ps.buffers_driver == 1)
		s->provider = HACCEL_HOSTMEM_PROVIDER_DRIVER;
	return 0;
}

static int p_put(void *user, uint32_t tensor, uint64_t tensor_offset, uint64_t dest_offset,
		 const void *src, uint64_t bytes, uint32_t buf)
{
	struct probe_sink *s = user;

	(void)tensor;
	(void)tensor_offset;
	(void)buf;
	if (dest_offset + bytes > s->dest_bytes)
		return -EINVAL;
	memcpy(s->dest + dest_offset, src, bytes);
	s->puts++;
	return 0;
}

static void probe_sink_init(struct probe_sink *s, struct haccel_ctx *ctx, int fd,
			    uint64_t dest_bytes)
{
	memset(s, 0, sizeof(*s));
	s->sink.user = s;
	s->sink.put = p_put;
	s->sink.begin = p_begin;
	s->sink.size = sizeof(s->sink);
	s->ctx = ctx;
	s->fd = fd;
	s->dest_bytes = dest_bytes;
	s->dest = calloc(1, dest_bytes);
	KTAP_ASSERT(s->dest != NULL);
}

/* Every byte of every tensor as written: data byte i is st_data_byte(i). */
static void expect_exact(struct haccel_weights *w, const struct probe_sink *s)
{
	struct haccel_weights_info wi;
	struct haccel_tensor_info t0;
	uint64_t bad = 0, total = 0;

	KTAP_ASSERT_EQ(haccel_weights_info(w, &wi), 0);
	KTAP_ASSERT_EQ(haccel_weights_tensor(w, 0, &t0), 0);
	for (uint32_t k = 0; k < wi.n_tensors; k++) {
		struct haccel_tensor_info t;

		KTAP_ASSERT_EQ(haccel_weights_tensor(w, k, &t), 0);
		for (uint64_t b = 0; b < t.bytes; b++)
			bad += s->dest[t.dest_offset + b] != st_data_byte(t.file_offset - t0.file_offset + b);
		total += t.bytes;
	}
	ktap_diag("%llu tensor bytes compared, %llu differ", (unsigned long long)total,
		  (unsigned long long)bad);
	KTAP_EXPECT_EQ(bad, 0);
	KTAP_EXPECT_EQ(total, wi.tensor_bytes);
}

static struct haccel_weights *open_checkpoint(struct haccel_ctx *ctx, struct haccel_weights_info *wi)
{
	struct haccel_weights *w;
	int fd = open(checkpoint(), O_RDONLY | O_DIRECT);

	if (fd < 0)
		hd_missing("no O_DIRECT checkpoint %s: %s", checkpoint(), strerror(errno));
	close(fd);
	KTAP_ASSERT_EQ(haccel_weights_open(ctx, checkpoint(), 0, &w), 0);
	KTAP_ASSERT_EQ(haccel_weights_info(w, wi), 0);
	return w;
}

static void load_params(struct haccel_load_params *p, uint32_t hostmem_flags)
{
	haccel_load_params_init(p);
	p->flags = HACCEL_LOAD_DIRECT;
	p->queue_depth = QD;
	p->chunk_bytes = CHUNK;
	p->node = 0;
	p->hostmem_flags = hostmem_flags;
}

static void odirect_load_into_driver_pinned_staging(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_hostmem_provider_stats ps;
	struct haccel_hostmem_stats hs;
	struct haccel_weights_info wi;
	struct haccel_load_params p;
	struct haccel_load_stats ls;
	struct haccel_weights *w = open_checkpoint(ctx, &wi);
	struct probe_sink s;
	struct hd_stats st;
	long long pins = hd_foll_pins();
	int ret;

	probe_sink_init(&s, ctx, fd, wi.dest_bytes);
	hd_stats(fd, &st);
	s.base_total = st.s.node_total;
	s.base_node0 = st.node[0];
	load_params(&p, 0);
	ret = haccel_load(w, &p, &s.sink, &ls);
	if (ret)
		ktap_diag("load: %s", hl_err(ctx));
	KTAP_ASSERT_EQ(ret, 0);
	ktap_diag("%llu bytes in %.1f ms, %s, %s, %llu puts", (unsigned long long)ls.tensor_bytes,
		  (double)ls.ns / 1e6, ls.direct ? "O_DIRECT" : "buffered",
		  ls.io_path == HACCEL_IO_URING ? "io_uring" : "pread", (unsigned long long)s.puts);
	KTAP_EXPECT_EQ(ls.direct, 1);
	KTAP_EXPECT_EQ(ls.io_path, HACCEL_IO_URING);
	KTAP_EXPECT_EQ(ls.staging_unpinned, 0);
	KTAP_EXPECT_EQ(ls.staging_unregistered, 0);
	KTAP_EXPECT_EQ(ls.tensor_bytes, wi.tensor_bytes);
	expect_exact(w, &s);

	/* While loading, the driver held the staging: node-wide, on node 0,
	 * and as this context's own pins. */
	KTAP_ASSERT(s.began);
	KTAP_EXPECT_EQ(s.staging_bytes, STAGING);
	KTAP_EXPECT_EQ(s.driver_total, s.base_total + STAGING);
	KTAP_EXPECT_EQ(s.driver_node0, s.base_node0 + STAGING);
	KTAP_EXPECT_EQ(s.ctx_bytes, STAGING);
	KTAP_EXPECT_EQ(s.provider, HACCEL_HOSTMEM_PROVIDER_DRIVER);
	/* The driver-pinned pages were registered with io_uring as fixed buffers. */
	KTAP_ASSERT_EQ(haccel_hostmem_stats(ctx, &hs), 0);
	KTAP_EXPECT_EQ(hs.io_uring_registrations, 2 * QD);
	ps = hl_pstats(ctx);
	KTAP_EXPECT_EQ(ps.driver_pins, 1);
	KTAP_EXPECT_EQ(ps.bytes_driver, 0);
	KTAP_EXPECT_EQ(ps.buffers_driver, 0);
	/* And all of it released when the load ended. */
	KTAP_EXPECT_EQ(hd_node_total(fd), s.base_total);
	if (pins >= 0) {
		/* io_uring pinned the same pages for its fixed buffers and drops
		 * them when the ring's teardown work runs, after the close. */
		for (int k = 0; k < 200 && hd_foll_pins() != pins; k++)
			usleep(10000);
		KTAP_EXPECT_EQ(hd_foll_pins(), pins);
	}
	free(s.dest);
	haccel_weights_close(w);
	haccel_close(ctx);
}

static struct hd_quotas saved;
static int saved_fd = -1;

static void restore_quotas(void)
{
	if (saved_fd >= 0)
		hd_quotas_restore(saved_fd, &saved);
	saved_fd = -1;
}

/* Staging over node 0's quota: the load fails saying so; allowed, it reads
 * through unpinned staging and still delivers every byte. */
static void load_over_quota(void)
{
	int fd = hd_open();
	struct haccel_ctx *ctx = hl_ctx();
	struct haccel_weights_info wi;
	struct haccel_load_params p;
	struct haccel_load_stats ls;
	struct haccel_weights *w = open_checkpoint(ctx, &wi);
	struct drm_haccel_quota q;
	struct probe_sink s;
	int ret;

	hd_quotas_save(fd, &saved);
	saved_fd = fd;
	atexit(restore_quotas);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	KTAP_ASSERT_EQ(hd_quota_set(fd, 0, hd_node_used(fd, 0) + STAGING / 2, q.client_limit), 0);

	probe_sink_init(&s, ctx, fd, wi.dest_bytes);
	load_params(&p, 0);
	ret = haccel_load(w, &p, &s.sink, &ls);
	ktap_diag("%s", hl_err(ctx));
	KTAP_EXPECT_EQ(ret, -EDQUOT);
	HL_EXPECT_ERR(ctx, "load: staging buffers");
	HL_EXPECT_ERR(ctx, "node 0's node-wide quota is");
	KTAP_EXPECT_EQ(s.puts, 0);

	load_params(&p, HACCEL_HOSTMEM_ALLOW_UNPINNED);
	/* Unpinned staging cannot be registered as fixed buffers here either
	 * way: io_uring pins them itself, which is fine for root. */
	ret = haccel_load(w, &p, &s.sink, &ls);
	if (ret)
		ktap_diag("load: %s", hl_err(ctx));
	KTAP_ASSERT_EQ(ret, 0);
	KTAP_EXPECT_EQ(ls.staging_unpinned, 1);
	KTAP_EXPECT_EQ(ls.direct, 1);
	KTAP_EXPECT_EQ(hl_lines("continuing unpinned (HACCEL_HOSTMEM_ALLOW_UNPINNED)", HACCEL_LOG_WARN), 1);
	expect_exact(w, &s);
	restore_quotas();
	free(s.dest);
	haccel_weights_close(w);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(odirect_load_into_driver_pinned_staging),
	KTAP_CASE(load_over_quota),
};

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write-checkpoint"))
		return write_checkpoint(argv[2]);
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	return KTAP_MAIN(argc, argv, cases);
}
