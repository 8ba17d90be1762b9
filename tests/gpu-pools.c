// SPDX-License-Identifier: MIT
/*
 * Pools in GPU memory (HACCEL_MEM_CUDA) and the swap primitives: pages and
 * state slots copied to host memory and back, batched, on host pools
 * (everywhere) and on GPU pools (with a GPU: copy on write and checkpoints
 * done by the device, checked through swaps). Without a GPU, a GPU pool is
 * refused with -ENODEV.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-util.h"
#include "haccel.h"

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ seed;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static struct haccel_kv_pool *kv_pool(struct haccel_ctx *ctx, uint32_t mem)
{
	struct haccel_kv_pool_config c;
	struct haccel_kv_pool *p = NULL;

	haccel_kv_pool_config_init(&c);
	c.n_layers = 3;
	c.n_pages = 64;
	c.max_seqs = 8;
	c.max_seq_tokens = 1024;
	c.mem = mem;
	KTAP_ASSERT_EQ(haccel_kv_pool_create(ctx, &c, &p), 0);
	return p;
}

static struct haccel_state_pool *state_pool(struct haccel_ctx *ctx, uint32_t mem)
{
	struct haccel_state_pool_config c;
	struct haccel_state_pool *p = NULL;

	haccel_state_pool_config_init(&c);
	c.n_layers = 2;
	c.n_heads = 4;
	c.n_slots = 8;
	c.n_checkpoints = 4;
	c.mem = mem;
	KTAP_ASSERT_EQ(haccel_state_pool_create(ctx, &c, &p), 0);
	return p;
}

/*
 * Pages out and back: swap_in pattern A into 5 pages, swap_out gives A;
 * on a host pool the bytes land in each region at page * page_bytes of
 * that region, in layer-major, stream order. Bad arguments copy nothing.
 */
static void kv_round_trip(struct haccel_ctx *ctx, uint32_t mem)
{
	struct haccel_kv_pool *p = kv_pool(ctx, mem);
	struct haccel_kv_pool_info info;
	uint32_t pages[5], bad[2];

	KTAP_ASSERT_EQ(haccel_kv_pool_info(p, &info), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_get(p, 5, pages), 0);
	size_t n = 5 * info.page_bytes;
	uint8_t *a = malloc(n), *b = calloc(1, n);
	KTAP_ASSERT(a && b);
	fill(a, n, mem + 1);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_in(p, pages, 5, a, n), 0);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(p, pages, 5, b, n), 0);
	KTAP_EXPECT(memcmp(a, b, n) == 0);
	/* Another order out: page i of the list is slot i of the buffer. */
	uint32_t rev[5] = { pages[4], pages[3], pages[2], pages[1], pages[0] };
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(p, rev, 5, b, n), 0);
	for (uint32_t i = 0; i < 5; i++)
		KTAP_EXPECT(memcmp(b + i * info.page_bytes, a + (4 - i) * info.page_bytes,
				   info.page_bytes) == 0);
	if (mem == HACCEL_MEM_HOST) {
		/* The layout: region r of page i at the region's base. */
		uint64_t off = 0;
		for (uint32_t l = 0; l < info.n_layers; l++)
			for (uint32_t s = 0; s < info.n_streams; s++) {
				struct haccel_kv_region r;
				KTAP_ASSERT_EQ(haccel_kv_pool_region(p, l, s, &r), 0);
				KTAP_EXPECT(memcmp((uint8_t *)r.base + pages[0] * r.page_bytes, a + off,
						   r.page_bytes) == 0);
				off += r.page_bytes;
			}
		KTAP_EXPECT_EQ(off, info.page_bytes);
	}
	/* Refused, nothing copied: page out of range, buffer too small. */
	memset(b, 0xee, n);
	bad[0] = pages[0];
	bad[1] = info.n_pages;
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(p, bad, 2, b, n), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_in(p, pages, 5, b, n - 1), -EINVAL);
	KTAP_EXPECT_EQ(haccel_kv_pages_swap_out(p, pages, 5, NULL, n), -EINVAL);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(p, pages, 1, b, info.page_bytes), 0);
	KTAP_EXPECT(memcmp(a, b, info.page_bytes) == 0);
	KTAP_EXPECT_EQ(haccel_kv_pages_put(p, pages, 5), 0);
	haccel_kv_pool_destroy(p);
	free(a), free(b);
}

static void state_round_trip(struct haccel_ctx *ctx, uint32_t mem)
{
	struct haccel_state_pool *p = state_pool(ctx, mem);
	struct haccel_state_layout lay;
	uint32_t s[3], ck;

	KTAP_ASSERT_EQ(haccel_state_pool_layout(p, &lay), 0);
	for (int i = 0; i < 3; i++)
		KTAP_ASSERT_EQ(haccel_state_slot_alloc(p, 0, &s[i]), 0);
	size_t n = 3 * lay.slot_bytes;
	uint8_t *a = malloc(n), *b = calloc(1, n);
	KTAP_ASSERT(a && b);
	fill(a, n, 7 + mem);
	KTAP_ASSERT_EQ(haccel_state_slots_swap_in(p, s, 3, a, n), 0);
	KTAP_ASSERT_EQ(haccel_state_slots_swap_out(p, s, 3, b, n), 0);
	KTAP_EXPECT(memcmp(a, b, n) == 0);
	/* A checkpoint of slot 0 restored into slot 2: the device copies. */
	KTAP_ASSERT_EQ(haccel_state_ckpt_save(p, s[0], 42, 10, 0, &ck), 0);
	KTAP_ASSERT_EQ(haccel_state_ckpt_restore(p, ck, s[2]), 0);
	KTAP_ASSERT_EQ(haccel_state_slots_swap_out(p, &s[2], 1, b, lay.slot_bytes), 0);
	KTAP_EXPECT(memcmp(a, b, lay.slot_bytes) == 0);
	/* A freed slot is refused; a freshly allocated one reads as zeros. */
	KTAP_ASSERT_EQ(haccel_state_slot_free(p, s[1]), 0);
	KTAP_EXPECT_EQ(haccel_state_slots_swap_out(p, &s[1], 1, b, n), -EINVAL);
	KTAP_EXPECT_EQ(haccel_state_slots_swap_out(p, s, 1, b, lay.slot_bytes - 1), -EINVAL);
	KTAP_ASSERT_EQ(haccel_state_slot_alloc(p, 0, &s[1]), 0);
	KTAP_ASSERT_EQ(haccel_state_slots_swap_out(p, &s[1], 1, b, lay.slot_bytes), 0);
	size_t nz = 0;
	for (size_t i = 0; i < lay.slot_bytes; i++)
		nz += b[i] != 0;
	KTAP_EXPECT_EQ(nz, 0);
	haccel_state_pool_destroy(p);
	free(a), free(b);
}

static void test_host_swap(void)
{
	struct haccel_ctx *ctx;

	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	kv_round_trip(ctx, HACCEL_MEM_HOST);
	state_round_trip(ctx, HACCEL_MEM_HOST);
	haccel_close(ctx);
}

static void test_gpu_swap(void)
{
	gpu_open();
	kv_round_trip(gpu_ctx, HACCEL_MEM_CUDA);
	state_round_trip(gpu_ctx, HACCEL_MEM_CUDA);
	gpu_close();
}

/* Copy on write in GPU memory: a forked sequence's first append copies the
 * shared partial page on the device; in every region the copy holds the
 * parent's bytes of the tokens the parent had in that page (copy on write
 * carries those, not the unused rest of the page). */
static void test_gpu_cow(void)
{
	gpu_open();
	struct haccel_kv_pool *p = kv_pool(gpu_ctx, HACCEL_MEM_CUDA);
	struct haccel_kv_pool_info info;
	const uint32_t *bt;
	uint32_t seq, child, np, parent_page;
	int32_t tok[100];

	for (int i = 0; i < 100; i++)
		tok[i] = i;
	KTAP_ASSERT_EQ(haccel_kv_pool_info(p, &info), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(p, NULL, 0, &seq, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(p, seq, tok, 70, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(p, seq, &bt, &np, NULL), 0);
	KTAP_ASSERT_EQ(np, 2);
	parent_page = bt[1];
	uint8_t *a = malloc(info.page_bytes), *b = malloc(info.page_bytes);
	KTAP_ASSERT(a && b);
	fill(a, info.page_bytes, 99);
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_in(p, &parent_page, 1, a, info.page_bytes), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_fork(p, seq, &child), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(p, child, tok + 70, 3, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(p, child, &bt, &np, NULL), 0);
	KTAP_EXPECT(bt[1] != parent_page);
	uint32_t copy = bt[1];
	KTAP_ASSERT_EQ(haccel_kv_pages_swap_out(p, &copy, 1, b, info.page_bytes), 0);
	/* Swapped pages are laid out region after region (layer-major). */
	uint64_t off = 0, compared = 0;
	for (uint32_t l = 0; l < info.n_layers; l++)
		for (uint32_t s = 0; s < info.n_streams; s++) {
			struct haccel_kv_region r;
			uint64_t n;

			KTAP_ASSERT_EQ(haccel_kv_pool_region(p, l, s, &r), 0);
			n = (uint64_t)(70 % info.page_tokens) * r.bytes_per_token;
			KTAP_EXPECT(memcmp(a + off, b + off, n) == 0);
			compared += n;
			off += r.page_bytes;
		}
	KTAP_EXPECT_EQ(off, info.page_bytes);
	KTAP_EXPECT(compared > 0);
	haccel_kv_pool_destroy(p);
	free(a), free(b);
	gpu_close();
}

/* No GPU: a pool in GPU memory is refused with -ENODEV. */
static void test_no_gpu(void)
{
	struct haccel_gpu_info gi;
	struct haccel_kv_pool_config c;
	struct haccel_kv_pool *p = NULL;
	struct haccel_ctx *ctx;

	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	if (!haccel_gpu_info(ctx, &gi)) {
		haccel_close(ctx);
		ktap_skip("GPU present");
	}
	haccel_kv_pool_config_init(&c);
	c.n_pages = 4;
	c.mem = HACCEL_MEM_CUDA;
	KTAP_EXPECT_EQ(haccel_kv_pool_create(ctx, &c, &p), -ENODEV);
	KTAP_EXPECT(p == NULL);
	haccel_close(ctx);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(test_host_swap),
	KTAP_CASE(test_no_gpu),
	KTAP_CASE(test_gpu_swap),
	KTAP_CASE(test_gpu_cow),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
