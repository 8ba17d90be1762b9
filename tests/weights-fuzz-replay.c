// SPDX-License-Identifier: MIT
/* The safetensors fuzz target over its seed corpus (bad-* rejected, the rest accepted) and over every input that once crashed it. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz-safetensors.c"
#include "st-writer.h"

#ifndef HACCEL_TOP_SRCDIR
#define HACCEL_TOP_SRCDIR "."
#endif

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	KTAP_ASSERT(f != NULL);
	KTAP_ASSERT(fseek(f, 0, SEEK_END) == 0);
	n = ftell(f);
	KTAP_ASSERT(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	KTAP_ASSERT(buf != NULL);
	KTAP_ASSERT(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/*
 * Run every file of tests/fuzz/<sub> through the target. expect_bad: -1
 * any outcome (a regression only has to not crash), else whether a name
 * starting with "bad-" must be rejected and the others accepted.
 */
static unsigned int replay(const char *sub, int expect_bad)
{
	struct haccel_ctx *ctx = st_ctx();
	char dirpath[ST_PATH], path[ST_PATH];
	struct dirent *de;
	unsigned int n = 0;
	DIR *d;

	snprintf(dirpath, sizeof(dirpath), "%s/tests/fuzz/%s", HACCEL_TOP_SRCDIR, sub);
	d = opendir(dirpath);
	KTAP_ASSERT(d != NULL);
	while ((de = readdir(d))) {
		uint8_t *buf;
		size_t len;
		int ret;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "README"))
			continue;
		buf = slurp(st_join(path, dirpath, de->d_name), &len);
		ret = fuzz_st_one(ctx, buf, len);
		free(buf);
		n++;
		if (expect_bad < 0)
			continue;
		if (!strncmp(de->d_name, "bad-", 4))
			KTAP_EXPECT_EQ(ret, -EBADMSG);
		else if (ret) {
			char msg[1024];

			haccel_last_error(ctx, msg, sizeof(msg));
			ktap_fail_at(__FILE__, __LINE__, "seed %s rejected: %s", de->d_name, msg);
		}
	}
	closedir(d);
	haccel_close(ctx);
	return n;
}

static void t_seed_corpus(void)
{
	KTAP_EXPECT(replay("corpus", 1) >= 12);
}

static void t_regressions(void)
{
	ktap_diag("%u regression inputs", replay("regressions", -1));
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_seed_corpus),
	KTAP_CASE(t_regressions),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
