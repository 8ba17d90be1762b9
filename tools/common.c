// SPDX-License-Identifier: MIT
/* Helpers shared by the tools. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "haccel.h"

const char *tool_name = "haccel";

void tool_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void tool_log_sink(void *user, int level, const char *msg)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };

	(void)user;
	if (level > HACCEL_LOG_ERROR && level <= HACCEL_LOG_DEBUG)
		fprintf(stderr, "haccel: %s: %s\n", names[level], msg);
}

int tool_ctx_open(int level, struct haccel_ctx **ctx)
{
	struct haccel_open_params p;

	haccel_open_params_init(&p);
	if (level >= 0)
		p.log_level = level;
	p.log_fn = tool_log_sink;
	return haccel_open(&p, ctx);
}

int tool_print_json(json_t *v)
{
	int ret;

	if (!v) {
		tool_err("out of memory building JSON output");
		return -ENOMEM;
	}
	ret = json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(v);
	fputc('\n', stdout);
	fflush(stdout);
	return ret ? -EIO : 0;
}

uint64_t tool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *tool_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

int tool_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int tool_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default:
		return -EINVAL;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'B' || *end == 'b') && shift)
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int tool_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	close(fd);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return (int)n;
}

const char *tool_subcommand(int argc, char **argv, const char *cmd, const char *subs, int help,
			    void (*usage)(FILE *f), int *rc)
{
	/* argv[optind] is cmd itself: haccel-ctl dispatched on it. */
	optind++;
	if (help) {
		usage(stdout);
		*rc = EXIT_OK;
		return NULL;
	}
	if (optind >= argc) {
		tool_err("%s: missing subcommand (%s)", cmd, subs);
		usage(stderr);
		*rc = EXIT_USAGE;
		return NULL;
	}
	return argv[optind++];
}
