// SPDX-License-Identifier: MIT
/* Every kernel entry point in kernels/ starts with HAC_PDL(): the library launches them all as programmatic dependent launches (libhaccel/gpu/module.c), which keep stream order for memory only if the kernel waits first. */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktap.h"
#include "test-util.h"

/* Past blanks and line continuations (kernels defined in macros). */
static const char *skip_blank(const char *p)
{
	while (*p && (isspace((unsigned char)*p) || *p == '\\'))
		p++;
	return p;
}

/* The kernels of one file: each "HACCEL_K " that starts a definition (not
 * the macro's own #define, not a comment), and its body's first
 * statement. Returns how many it found. */
static int check_file(const char *rel)
{
	char *src = test_slurp_src(rel);
	int n = 0;

	for (const char *p = src; (p = strstr(p, "HACCEL_K ")) != NULL; p += 9) {
		const char *bol = p, *brace;
		int line = 1;

		while (bol > src && bol[-1] != '\n')
			bol--;
		bol = skip_blank(bol);
		if (!strncmp(bol, "#define", 7) || *bol == '*' || !strncmp(bol, "/*", 2))
			continue;
		for (const char *q = src; q < p; q++)
			line += *q == '\n';
		brace = strchr(p, '{');
		KTAP_ASSERT(brace != NULL);
		if (strncmp(skip_blank(brace + 1), "HAC_PDL();", 10))
			ktap_fail_at(__FILE__, __LINE__,
				     "%s:%d: a kernel whose body does not start with HAC_PDL();", rel,
				     line);
		n++;
	}
	free(src);
	return n;
}

static void t_every_kernel_waits(void)
{
	static const char *const files[] = { "kernels/common.cu", "kernels/gemm.cu",
					     "kernels/kda.cu", "kernels/dsa.cu" };
	int n = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		n += check_file(files[i]);
	ktap_diag("%d kernel definitions checked", n);
	/* The scan itself is checked by what it finds: the 40 definitions of
	 * 2026-12-01 at least. */
	KTAP_EXPECT(n >= 40);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_every_kernel_waits),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
