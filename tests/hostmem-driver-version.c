// SPDX-License-Identifier: MIT
/* The ABI version rule of uapi/haccel_drm.h (same major, driver's minimum userspace version at most ours) as a pure function over a table of (driver, driver minimum, ours) cases, with the message each gives. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hostmem/driver.h"
#include "ktap.h"

#define V(maj, min) ((((uint64_t)(maj)) << 16) | (uint64_t)(min))

struct vcase {
	uint64_t drv, drv_min, ours;
	int status;
	const char *msg; /* the whole message, or a part of it when partial */
	int partial;
};

static const struct vcase table[] = {
	/* The driver built from this tree and this library. */
	{ V(1, 0), V(1, 0), V(1, 0), 0,
	  "haccel.ko speaks ABI 1.0 (serves userspace from 1.0); this library speaks 1.0: compatible", 0 },
	/* A newer driver minor still serving 1.0 userspace. */
	{ V(1, 3), V(1, 0), V(1, 0), 0, ": compatible", 1 },
	/* A newer library minor on an older driver: features by capability. */
	{ V(1, 0), V(1, 0), V(1, 3), 0, "this library speaks 1.3: compatible", 1 },
	{ V(1, 5), V(1, 2), V(1, 3), 0, "(serves userspace from 1.2)", 1 },
	/* Its minimum equal to ours: still served. */
	{ V(1, 5), V(1, 3), V(1, 3), 0, ": compatible", 1 },
	{ V(1, 0xffff), V(1, 0), V(1, 0), 0, "ABI 1.65535", 1 },
	/* A driver that no longer serves our minor. */
	{ V(1, 5), V(1, 4), V(1, 3), -EPROTO,
	  "haccel.ko speaks ABI 1.5 (serves userspace from 1.4); this library speaks 1.3: update libhaccel", 0 },
	/* docs/abi.md's example, word for word. */
	{ V(2, 0), V(2, 0), V(1, 3), -EPROTO,
	  "haccel.ko speaks ABI 2.0 (serves userspace from 2.0); this library speaks 1.3: update libhaccel", 0 },
	/* Another major is refused even when its minimum would admit us. */
	{ V(2, 0), V(1, 0), V(1, 0), -EPROTO, "this library speaks 1.0: update libhaccel", 1 },
	/* An older driver major: the driver is the one to update. */
	{ V(1, 0), V(1, 0), V(2, 0), -EPROTO,
	  "haccel.ko speaks ABI 1.0 (serves userspace from 1.0); this library speaks 2.0: update haccel.ko", 0 },
	{ V(0, 9), V(0, 1), V(1, 0), -EPROTO, ": update haccel.ko", 1 },
	/* Values that are no encoded version. */
	{ 0, 0, V(1, 0), -EPROTO, "which is no encoded version", 1 },
	{ V(1, 0), 0, V(1, 0), -EPROTO, "which is no encoded version", 1 },
	{ 1ull << 32, V(1, 0), V(1, 0), -EPROTO, "0x100000000", 1 },
	{ V(1, 0), ~0ull, V(1, 0), -EPROTO, "no encoded version", 1 },
};

static void t_version_table(void)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct vcase *c = &table[i];
		char why[512] = "";
		int ret = haccel__driver_version_check(c->drv, c->drv_min, c->ours, why, sizeof(why));

		ktap_diag("driver 0x%llx min 0x%llx ours 0x%llx: %d %s", (unsigned long long)c->drv,
			  (unsigned long long)c->drv_min, (unsigned long long)c->ours, ret, why);
		if (ret != c->status)
			ktap_fail_at(__FILE__, __LINE__, "case %zu: status %d, want %d", i, ret, c->status);
		if (c->partial ? !strstr(why, c->msg) : strcmp(why, c->msg))
			ktap_fail_at(__FILE__, __LINE__, "case %zu: message \"%s\", want %s\"%s\"", i,
				     why, c->partial ? "one containing " : "", c->msg);
	}
}

/* The rule is a pure function of its three numbers: symmetric cases. */
static void t_every_minor_pair(void)
{
	unsigned int bad = 0;

	for (unsigned int drv = 0; drv < 8; drv++)
		for (unsigned int min = 0; min <= drv; min++)
			for (unsigned int ours = 0; ours < 8; ours++) {
				char why[512];
				int want = min <= ours ? 0 : -EPROTO;
				int ret = haccel__driver_version_check(V(1, drv), V(1, min), V(1, ours),
								       why, sizeof(why));

				bad += ret != want;
				/* Another major never passes. */
				bad += haccel__driver_version_check(V(2, drv), V(2, min), V(1, ours),
								    why, sizeof(why)) != -EPROTO;
				bad += haccel__driver_version_check(V(1, drv), V(1, min), V(3, ours),
								    why, sizeof(why)) != -EPROTO;
			}
	KTAP_EXPECT_EQ(bad, 0);
}

/* A message never overruns a short buffer. */
static void t_short_buffer(void)
{
	char why[16];

	memset(why, 'x', sizeof(why));
	KTAP_EXPECT_EQ(haccel__driver_version_check(V(2, 0), V(2, 0), V(1, 0), why, 8), -EPROTO);
	KTAP_EXPECT_EQ(strlen(why), 7);
	KTAP_EXPECT_EQ(why[8], 'x');
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_version_table),
	KTAP_CASE(t_every_minor_pair),
	KTAP_CASE(t_short_buffer),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
