// SPDX-License-Identifier: MIT
/* Status codes, version queries and context creation behave as documented. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "haccel.h"
#include "ktap.h"

static void t_every_status_has_name_and_message(void)
{
	static const struct { int code; const char *name; } all[] = {
#define ENTRY(name, msg) { HACCEL_##name, #name },
		HACCEL_STATUS_MAP(ENTRY)
#undef ENTRY
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		KTAP_EXPECT(all[i].code < 0);
		KTAP_EXPECT(!strcmp(haccel_status_name(all[i].code), all[i].name));
		const char *m = haccel_strerror(all[i].code);
		KTAP_EXPECT(m && *m && strcmp(m, "unknown status"));
		/* Codes are distinct: no two names share one. */
		for (size_t j = 0; j < i; j++)
			KTAP_EXPECT(all[i].code != all[j].code);
	}
	KTAP_EXPECT(!strcmp(haccel_status_name(0), "OK"));
	KTAP_EXPECT(!strcmp(haccel_strerror(0), "success"));
	KTAP_EXPECT_EQ(HACCEL_EINVAL, -EINVAL);
	KTAP_EXPECT_EQ(HACCEL_ENOMEM, -ENOMEM);
}

static void t_system_errno_described(void)
{
	/* Not in the table, passed up from a syscall: still described. */
	KTAP_EXPECT(!strcmp(haccel_status_name(-EMFILE), "EMFILE"));
	KTAP_EXPECT(strstr(haccel_strerror(-EMFILE), "open files") != NULL);
	KTAP_EXPECT(!strcmp(haccel_strerror(-100000), "unknown status"));
	KTAP_EXPECT(!strcmp(haccel_strerror(7), "unknown status"));
	KTAP_EXPECT(!strcmp(haccel_status_name(7), "EUNKNOWN"));
	/* INT_MIN has no negation (undefined behaviour under UBSan). */
	KTAP_EXPECT(!strcmp(haccel_strerror(INT_MIN), "unknown status"));
	KTAP_EXPECT(!strcmp(haccel_status_name(INT_MIN), "EUNKNOWN"));
	KTAP_EXPECT(!strcmp(haccel_status_name(INT_MIN + 1), "EUNKNOWN"));
}

static void t_version(void)
{
	char buf[32];

	KTAP_EXPECT_EQ(haccel_version(), HACCEL_VERSION);
	snprintf(buf, sizeof(buf), "%d.%d.%d", HACCEL_VERSION_MAJOR,
		 HACCEL_VERSION_MINOR, HACCEL_VERSION_PATCH);
	KTAP_EXPECT(!strcmp(haccel_version_string(), buf));
	KTAP_EXPECT(!strcmp(haccel_version_string(), PACKAGE_VERSION));
}

static int lines_seen;
static void count_lines(void *user, int level, const char *msg)
{
	(void)msg;
	if (level == HACCEL_LOG_DEBUG && user == &lines_seen)
		lines_seen++;
}

static void t_open_close(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = NULL;

	unsetenv("HACCEL_LOG");
	KTAP_ASSERT_EQ(haccel_open(NULL, &ctx), 0);
	KTAP_EXPECT(ctx != NULL);
	haccel_close(ctx);
	haccel_close(NULL);
	KTAP_EXPECT_EQ(haccel_open(NULL, NULL), -EINVAL);

	/* The log callback receives debug lines when asked for them. */
	haccel_open_params_init(&p);
	p.log_level = HACCEL_LOG_DEBUG;
	p.log_fn = count_lines;
	p.log_user = &lines_seen;
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	KTAP_EXPECT(lines_seen >= 1);
	haccel_close(ctx);

	/* HACCEL_LOG overrides the level. */
	lines_seen = 0;
	p.log_level = HACCEL_LOG_ERROR;
	setenv("HACCEL_LOG", "debug", 1);
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	KTAP_EXPECT(lines_seen >= 1);
	haccel_close(ctx);
	unsetenv("HACCEL_LOG");
}

static void t_open_rejects_bad_params(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = (struct haccel_ctx *)&p;
	struct {
		struct haccel_open_params p;
		uint64_t extra;
	} big;

	haccel_open_params_init(&p);
	p.flags = 1;
	KTAP_EXPECT_EQ(haccel_open(&p, &ctx), -EINVAL);
	KTAP_EXPECT(ctx == NULL);

	haccel_open_params_init(&p);
	p.reserved = 1;
	KTAP_EXPECT_EQ(haccel_open(&p, &ctx), -EINVAL);

	haccel_open_params_init(&p);
	p.log_level = 9;
	KTAP_EXPECT_EQ(haccel_open(&p, &ctx), -EINVAL);

	haccel_open_params_init(&p);
	p.size = 4;
	KTAP_EXPECT_EQ(haccel_open(&p, &ctx), -EINVAL);

	/* A newer, larger struct: accepted when its extra bytes are zero. */
	memset(&big, 0, sizeof(big));
	haccel_open_params_init(&big.p);
	big.p.size = sizeof(big);
	KTAP_ASSERT_EQ(haccel_open(&big.p, &ctx), 0);
	haccel_close(ctx);
	big.extra = 1;
	KTAP_EXPECT_EQ(haccel_open(&big.p, &ctx), -EINVAL);
}

static char root_error[1024];
static int root_errors;
static void keep_error(void *user, int level, const char *msg)
{
	(void)user;
	if (level == HACCEL_LOG_ERROR) {
		root_errors++;
		snprintf(root_error, sizeof(root_error), "%s", msg);
	}
}

/* A $HACCEL_SYSFS_ROOT that does not fit is refused, not cut short. */
static void t_open_sysfs_root_too_long(void)
{
	struct haccel_open_params p;
	struct haccel_ctx *ctx = (struct haccel_ctx *)&p;
	char root[400];

	haccel_open_params_init(&p);
	p.log_fn = keep_error;
	memset(root, 'd', sizeof(root));
	root[0] = '/';
	/* 255 bytes fit. */
	root[255] = '\0';
	KTAP_ASSERT_EQ(setenv("HACCEL_SYSFS_ROOT", root, 1), 0);
	KTAP_ASSERT_EQ(haccel_open(&p, &ctx), 0);
	haccel_close(ctx);
	KTAP_EXPECT_EQ(root_errors, 0);

	/* 256 do not: -EINVAL, no context, and the reason is logged. */
	root[255] = 'd';
	root[256] = '\0';
	KTAP_ASSERT_EQ(setenv("HACCEL_SYSFS_ROOT", root, 1), 0);
	KTAP_EXPECT_EQ(haccel_open(&p, &ctx), -EINVAL);
	KTAP_EXPECT(ctx == NULL);
	KTAP_EXPECT_EQ(root_errors, 1);
	KTAP_EXPECT(strstr(root_error, "HACCEL_SYSFS_ROOT is 256 bytes long") != NULL);
	KTAP_EXPECT(strstr(root_error, "255") != NULL);

	root[256] = 'd';
	root[sizeof(root) - 1] = '\0';
	KTAP_ASSERT_EQ(setenv("HACCEL_SYSFS_ROOT", root, 1), 0);
	ctx = (struct haccel_ctx *)&p;
	KTAP_EXPECT_EQ(haccel_open(&p, &ctx), -EINVAL);
	KTAP_EXPECT(ctx == NULL);
	KTAP_EXPECT_EQ(root_errors, 2);
	KTAP_EXPECT(strstr(root_error, "is 399 bytes long") != NULL);
	unsetenv("HACCEL_SYSFS_ROOT");
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_every_status_has_name_and_message),
	KTAP_CASE(t_system_errno_described),
	KTAP_CASE(t_version),
	KTAP_CASE(t_open_close),
	KTAP_CASE(t_open_rejects_bad_params),
	KTAP_CASE(t_open_sysfs_root_too_long),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
