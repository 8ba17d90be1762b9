// SPDX-License-Identifier: MIT
/* Every environment variable the weight loader reads is documented in the ENVIRONMENT section of haccel-ctl(1), haccel-bench(1) and libhaccel(3). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktap.h"
#include "test-util.h"

/* The names the loader's source passes to getenv() or env_on(). */
static int loader_knobs(char names[][64], int max)
{
	static const char *const calls[] = { "getenv(\"", "env_on(\"" };
	char *src = test_slurp_src("libhaccel/weights/stream.c");
	int n = 0;

	for (int c = 0; c < 2; c++)
		for (const char *p = src; (p = strstr(p, calls[c])); ) {
			const char *b = p + strlen(calls[c]), *e = strchr(b, '"');

			p = b;
			if (!e || e - b >= 64 || n >= max)
				continue;
			memcpy(names[n], b, (size_t)(e - b));
			names[n][e - b] = '\0';
			n++;
		}
	free(src);
	return n;
}

/* The ENVIRONMENT section of a man page: from .SH ENVIRONMENT to the next
 * .SH (cut in place). */
static const char *environment(char *man, const char *page)
{
	char *b = strstr(man, "\n.SH ENVIRONMENT\n"), *e;

	if (!b) {
		ktap_fail_at(__FILE__, __LINE__, "%s has no ENVIRONMENT section", page);
		return "";
	}
	b++;
	e = strstr(b + 1, "\n.SH ");
	if (e)
		*e = '\0';
	return b;
}

static void t_knobs_documented(void)
{
	static const char *const pages[] = { "docs/man/haccel-ctl.1", "docs/man/haccel-bench.1",
					     "docs/man/libhaccel.3" };
	char names[16][64];
	int n = loader_knobs(names, 16);

	/* The source is what is checked: it must name its knobs plainly. */
	KTAP_ASSERT(n >= 3);
	for (int i = 0; i < n; i++)
		ktap_diag("the loader reads %s", names[i]);
	for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++) {
		char *man = test_slurp_src(pages[p]);
		const char *env = environment(man, pages[p]);

		for (int i = 0; i < n; i++)
			if (!strstr(env, names[i]))
				ktap_fail_at(__FILE__, __LINE__, "%s: ENVIRONMENT lacks %s", pages[p],
					     names[i]);
		free(man);
	}
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_knobs_documented),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
