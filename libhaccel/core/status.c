// SPDX-License-Identifier: MIT
/* Status strings, generated from the same table as enum haccel_status. */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "haccel.h"

const char *haccel_strerror(int status)
{
	switch (status) {
	case 0:
		return "success";
#define HACCEL__STATUS_MSG(name, msg) \
	case HACCEL_##name:           \
		return msg;
		HACCEL_STATUS_MAP(HACCEL__STATUS_MSG)
#undef HACCEL__STATUS_MSG
	}
	/* INT_MIN has no positive counterpart (and is no errno). */
	if (status < 0 && status != INT_MIN) {
		/* A -errno passed up from the system: glibc's thread-safe,
		 * locale-free description. */
		const char *d = strerrordesc_np(-status);
		if (d)
			return d;
	}
	return "unknown status";
}

const char *haccel_status_name(int status)
{
	switch (status) {
	case 0:
		return "OK";
#define HACCEL__STATUS_NAME(name, msg) \
	case HACCEL_##name:            \
		return #name;
		HACCEL_STATUS_MAP(HACCEL__STATUS_NAME)
#undef HACCEL__STATUS_NAME
	}
	if (status < 0 && status != INT_MIN) {
		const char *n = strerrorname_np(-status);
		if (n)
			return n;
	}
	return "EUNKNOWN";
}
