// SPDX-License-Identifier: MIT
/*
 * NCCL loaded at run time: the probe reports a version where the library
 * is and a reason where it is not (no GPU needed), a library named by
 * HACCEL_NCCL_LIBRARY that does not exist is a clean "no NCCL", and with a
 * GPU an all-reduce over the local devices' communicators sums exactly:
 * one rank gives its own buffer back, bit for bit; with two GPUs or more
 * (skipped on one) every rank gets the sum of every rank's values, which
 * are chosen so that any order of the sum is exact.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-util.h"
#include "gpu/comm.h"
#include "haccel.h"

static void t_probe(void)
{
	struct haccel_nccl_info info;
	struct haccel_ctx *ctx;
	int ret;

	unsetenv("HACCEL_NCCL_LIBRARY");
	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	KTAP_EXPECT_EQ(haccel_nccl_info(ctx, NULL), -EINVAL);
	ret = haccel_nccl_info(ctx, &info);
	if (ret == 0) {
		ktap_diag("NCCL %u at %s", info.version, info.path);
		KTAP_EXPECT(info.version >= 20000);
		KTAP_EXPECT(info.path[0] != '\0');
		KTAP_EXPECT(info.reason[0] == '\0');
	} else {
		ktap_diag("%s", info.reason);
		KTAP_EXPECT_EQ(ret, -ENODEV);
		KTAP_EXPECT_EQ(info.version, 0);
		KTAP_EXPECT(!strncmp(info.reason, "no NCCL", 7));
	}
	/* A second probe answers from the table, the same. */
	struct haccel_nccl_info again;
	KTAP_EXPECT_EQ(haccel_nccl_info(ctx, &again), ret);
	KTAP_EXPECT(!memcmp(&info, &again, sizeof(info)));
	haccel_close(ctx);
}

static void t_named_library_missing(void)
{
	struct haccel_nccl_info info;
	struct haccel_ctx *ctx;

	setenv("HACCEL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	KTAP_EXPECT_EQ(haccel_nccl_info(ctx, &info), -ENODEV);
	ktap_diag("%s", info.reason);
	KTAP_EXPECT(strstr(info.reason, "/nonexistent/libnccl.so.2") != NULL);
	void *comm = NULL;
	int dev = 0;
	KTAP_EXPECT_EQ(haccel__comm_init_all(ctx, 1, &dev, &comm), -ENODEV);
	haccel_close(ctx);
	unsetenv("HACCEL_NCCL_LIBRARY");
}

static void t_all_reduce_local(void)
{
	struct haccel_nccl_info info;
	const size_t n = 4099;
	float *h = malloc(n * 4), *back = malloc(n * 4);
	void *comm = NULL;
	int dev = 0, count = 0;

	gpu_open();
	int ret = haccel_nccl_info(gpu_ctx, &info);

	if (ret == -ENODEV) {
		ktap_diag("%s", info.reason);
		gpu_close();
		ktap_skip("no NCCL");
	}
	KTAP_ASSERT_EQ(ret, 0);
	KTAP_ASSERT(h && back);
	for (size_t i = 0; i < n; i++)
		h[i] = (float)((int)(i % 97) - 48) * 0.37f;
	haccel__dptr src = gpu_up(h, n * 4), dst = gpu_alloc(n * 4);
	KTAP_ASSERT_EQ(haccel__comm_init_all(gpu_ctx, 1, &dev, &comm), 0);
	struct haccel__nccl *nc;
	KTAP_ASSERT_EQ(haccel__nccl_get(gpu_ctx, &nc), 0);
	KTAP_EXPECT_EQ(nc->CommCount(comm, &count), 0);
	KTAP_EXPECT_EQ(count, 1);
	void *st = gpu_g->stream;
	KTAP_ASSERT_EQ(haccel__comm_all_reduce_f32(gpu_ctx, 1, &comm, &src, &dst, n, &st), 0);
	gpu_down(back, dst, n * 4);
	KTAP_EXPECT(!memcmp(back, h, n * 4));
	haccel__comm_destroy_all(gpu_ctx, 1, &comm);
	free(h), free(back);
	gpu_close();
}

#define MAX_DEVS 8

/* Rank r's value i: a multiple of 1/4 in [-12.5, 12.5], so that the sum of
 * up to 8 of them is exact in fp32 whatever the order of NCCL's sums. */
static float rank_val(int r, size_t i)
{
	return (float)((int)((i * 7 + (size_t)r * 13) % 101) - 50) * 0.25f;
}

static void t_all_reduce_devices(void)
{
	const size_t n = 65537;
	struct haccel_nccl_info info;
	struct haccel__cuda *cu;
	void *comms[MAX_DEVS] = { 0 }, *streams[MAX_DEVS] = { 0 }, *pctx[MAX_DEVS] = { 0 };
	uint64_t send[MAX_DEVS] = { 0 }, recv[MAX_DEVS] = { 0 };
	int devs[MAX_DEVS], nd, ret;
	float *h = malloc(n * 4), *want = calloc(n, 4), *back = malloc(n * 4);

	gpu_open();
	cu = gpu_g->cu;
	nd = cu->n_devices < MAX_DEVS ? cu->n_devices : MAX_DEVS;
	if (nd < 2) {
		free(h), free(want), free(back);
		gpu_close();
		ktap_skip("one GPU: a sum over ranks needs two or more");
	}
	ret = haccel_nccl_info(gpu_ctx, &info);
	if (ret == -ENODEV) {
		ktap_diag("%s", info.reason);
		free(h), free(want), free(back);
		gpu_close();
		ktap_skip("no NCCL");
	}
	KTAP_ASSERT_EQ(ret, 0);
	KTAP_ASSERT(h && want && back);
	ktap_diag("%d GPUs, NCCL %u", nd, info.version);
	/* Each rank's buffers and stream in its device's primary context. */
	for (int r = 0; r < nd; r++) {
		devs[r] = r;
		KTAP_ASSERT_EQ(cu->DevicePrimaryCtxRetain(&pctx[r], r), 0);
		KTAP_ASSERT_EQ(cu->CtxSetCurrent(pctx[r]), 0);
		KTAP_ASSERT_EQ(cu->MemAlloc(&send[r], n * 4), 0);
		KTAP_ASSERT_EQ(cu->MemAlloc(&recv[r], n * 4), 0);
		KTAP_ASSERT_EQ(cu->StreamCreate(&streams[r], HACCEL__CU_STREAM_NON_BLOCKING), 0);
		for (size_t i = 0; i < n; i++) {
			h[i] = rank_val(r, i);
			want[i] += h[i];
		}
		KTAP_ASSERT_EQ(cu->MemcpyHtoD(send[r], h, n * 4), 0);
	}
	KTAP_ASSERT_EQ(haccel__comm_init_all(gpu_ctx, (uint32_t)nd, devs, comms), 0);
	KTAP_ASSERT_EQ(haccel__comm_all_reduce_f32(gpu_ctx, (uint32_t)nd, comms, send, recv, n,
						   streams), 0);
	for (int r = 0; r < nd; r++) {
		KTAP_ASSERT_EQ(cu->CtxSetCurrent(pctx[r]), 0);
		KTAP_ASSERT_EQ(cu->StreamSynchronize(streams[r]), 0);
		memset(back, 0xff, n * 4);
		KTAP_ASSERT_EQ(cu->MemcpyDtoH(back, recv[r], n * 4), 0);
		size_t bad = 0, first = n;

		for (size_t i = 0; i < n; i++)
			if (memcmp(&back[i], &want[i], 4) && bad++ == 0)
				first = i;
		if (bad)
			ktap_diag("rank %d: %zu of %zu sums differ, first at %zu: %g, want %g", r, bad,
				  n, first, (double)back[first], (double)want[first]);
		KTAP_EXPECT_EQ(bad, 0);
	}
	haccel__comm_destroy_all(gpu_ctx, (uint32_t)nd, comms);
	for (int r = 0; r < nd; r++) {
		cu->CtxSetCurrent(pctx[r]);
		cu->StreamDestroy(streams[r]);
		cu->MemFree(send[r]);
		cu->MemFree(recv[r]);
		cu->DevicePrimaryCtxRelease(r);
	}
	cu->CtxSetCurrent(cu->ctx);
	free(h), free(want), free(back);
	gpu_close();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_probe),
	KTAP_CASE(t_named_library_missing),
	KTAP_CASE(t_all_reduce_local),
	KTAP_CASE(t_all_reduce_devices),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
