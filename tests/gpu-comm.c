// SPDX-License-Identifier: MIT
/*
 * NCCL loaded at run time: the probe reports a version where the library
 * is and a reason where it is not (no GPU needed), a library named by
 * HACCEL_NCCL_LIBRARY that does not exist is a clean "no NCCL", and with a
 * GPU an all-reduce over the local devices' communicators sums exactly
 * (one rank: the sum is its own buffer, bit for bit).
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
	if (haccel_nccl_info(gpu_ctx, &info)) {
		ktap_diag("%s", info.reason);
		gpu_close();
		ktap_skip("no NCCL");
	}
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

static const struct ktap_case cases[] = {
	KTAP_CASE(t_probe),
	KTAP_CASE(t_named_library_missing),
	KTAP_CASE(t_all_reduce_local),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
