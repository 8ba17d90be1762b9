// SPDX-License-Identifier: MIT
/*
 * Every kernel entry point in kernels/ starts with HAC_PDL(): the library
 * launches them all as programmatic dependent launches
 * (libhaccel/gpu/module.c), which keep stream order for memory only if the
 * kernel waits first. A kernel may instead start with HAC_PDL_DEFERRED()
 * when it issues reads of data the kernel before it does not write, then
 * waits: its body must then call HAC_PDL() itself, or one of the device
 * functions listed here, each of which must.
 */
#include "config.h"

#include <ctype.h>
#include <stdbool.h>
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

/* Device functions that call HAC_PDL() for a deferred kernel. */
static const char *const waiters[] = { "gemm_few<", "kda_recurrent<", "dsa_mla_h16w<" };

/* The body from the brace at open to its matching brace (a copy). */
static char *body_of(const char *open)
{
	const char *q = open;
	int depth = 0;

	do {
		depth += *q == '{' ? 1 : *q == '}' ? -1 : 0;
		q++;
	} while (*q && depth > 0);
	char *b = malloc((size_t)(q - open) + 1);

	KTAP_ASSERT(b != NULL);
	memcpy(b, open, (size_t)(q - open));
	b[q - open] = 0;
	return b;
}

/* Where the definition of device function name (without its template
 * arguments) is, for waiters: its body must call HAC_PDL(). */
static int check_waiter(const char *src, const char *rel, const char *name)
{
	size_t n = strcspn(name, "<");
	char fn[64];
	int found = 0;

	KTAP_ASSERT(n + 2 <= sizeof(fn));
	memcpy(fn, name, n);
	fn[n] = '(';
	fn[n + 1] = 0;
	for (const char *p = src; (p = strstr(p, fn)) != NULL; p += n) {
		const char *after = p + n;

		if (p == src || !isspace((unsigned char)p[-1]))
			continue;
		/* a definition: ")" then "{" before any ";" */
		const char *brace = strchr(after, '{'), *semi = strchr(after, ';');

		if (!brace || (semi && semi < brace))
			continue;
		char *b = body_of(brace);

		if (!strstr(b, "HAC_PDL();"))
			ktap_fail_at(__FILE__, __LINE__, "%s: %.*s waits for no kernel", rel, (int)n,
				     name);
		free(b);
		found++;
	}
	return found;
}

/* The kernels of one file: each "HACCEL_K " that starts a definition (not
 * the macro's own #define, not a comment), and its body's first
 * statement. Returns how many it found. */
static int check_file(const char *rel, int *deferred)
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
		if (!strncmp(skip_blank(brace + 1), "HAC_PDL_DEFERRED();", 19)) {
			char *b = body_of(brace);
			bool waits = strstr(b, "HAC_PDL();") != NULL;

			for (size_t i = 0; i < sizeof(waiters) / sizeof(waiters[0]); i++)
				if (strstr(b, waiters[i]))
					waits = check_waiter(src, rel, waiters[i]) > 0;
			if (!waits)
				ktap_fail_at(__FILE__, __LINE__,
					     "%s:%d: a deferred kernel that never calls HAC_PDL();",
					     rel, line);
			free(b);
			(*deferred)++;
		} else if (strncmp(skip_blank(brace + 1), "HAC_PDL();", 10)) {
			ktap_fail_at(__FILE__, __LINE__,
				     "%s:%d: a kernel whose body does not start with HAC_PDL();", rel,
				     line);
		}
		n++;
	}
	free(src);
	return n;
}

static void t_every_kernel_waits(void)
{
	static const char *const files[] = { "kernels/common.cu", "kernels/gemm.cu",
					     "kernels/kda.cu", "kernels/dsa.cu" };
	int n = 0, deferred = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		n += check_file(files[i], &deferred);
	ktap_diag("%d kernel definitions checked, %d of them deferring their wait", n, deferred);
	/* The scan itself is checked by what it finds: the 40 definitions of
	 * 2026-12-01 at least. */
	KTAP_EXPECT(n >= 40);
	/* the few-row GEMMs (two macros), the recurrence (one macro, two
	 * kernels), the short convolution, the indexer's scoring, sparse MLA
	 * by roles (four kernels) */
	KTAP_EXPECT(deferred >= 10);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_every_kernel_waits),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
