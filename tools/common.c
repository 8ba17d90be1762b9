// SPDX-License-Identifier: MIT
/* Helpers shared by the tools. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "haccel.h"

const char *tool_name = "haccel";

/* The errno of the last failed write to stdout that we saw, if any. */
static int stdout_errno;

static void tool_check_stdout(void)
{
	int e = 0;

	if (fflush(stdout))
		e = errno;
	else if (ferror(stdout))
		e = stdout_errno ? stdout_errno : EIO;
	if (!e)
		return;
	tool_err("write error on standard output: %s", strerror(e));
	_exit(EXIT_FAIL);
}

int tool_flush(void)
{
	if (!fflush(stdout) && !ferror(stdout))
		return 0;
	if (errno && !stdout_errno)
		stdout_errno = errno;
	return -EIO;
}

/*
 * stdout's bytes go out through this, so that a write that fails in a
 * flush stdio makes on its own (a full buffer in the middle of a printf)
 * leaves its errno in stdout_errno: the exit's message then names the
 * cause (ENOSPC on a full disk), not EIO for want of one. Returns the bytes
 * written, fewer on an error (fopencookie(3): never negative).
 */
static ssize_t tool_out_write(void *cookie, const char *buf, size_t n)
{
	size_t done = 0;

	(void)cookie;
	while (done < n) {
		ssize_t w = write(STDOUT_FILENO, buf + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!stdout_errno)
				stdout_errno = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	return (ssize_t)done;
}

void tool_init(const char *name)
{
	cookie_io_functions_t io = { .write = tool_out_write };
	size_t have = __fbufsize(stdout), size = BUFSIZ;
	int mode = isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF;
	FILE *out;

	tool_name = name;
	/* glibc's stdout is a variable one may set. The new stream buffers
	 * as stdout was set to before main (stdbuf(1) -oL, -o0, -oSIZE: a
	 * line-buffered stream, a buffer of one byte for none, its size), or
	 * as stdio buffers stdout: by lines on a terminal, else in blocks. */
	if (__flbf(stdout))
		mode = _IOLBF, size = have > 1 ? have : BUFSIZ;
	else if (have == 1)
		mode = _IONBF;
	else if (have)
		mode = _IOFBF, size = have;
	fflush(stdout);
	out = fopencookie(NULL, "w", io);
	if (out && !setvbuf(out, NULL, mode, size))
		stdout = out;
	else if (out)
		fclose(out);
	atexit(tool_check_stdout);
}

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
	errno = 0;
	ret = json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(v);
	if (!ret && fputc('\n', stdout) == EOF)
		ret = -1;
	if (fflush(stdout))
		ret = -1;
	if (ret || ferror(stdout)) {
		if (errno)
			stdout_errno = errno;
		return -EIO;
	}
	return 0;
}

const char *tool_option_name(const struct option *lo, int val)
{
	for (const struct option *l = lo; l->name; l++)
		if (l->val == val)
			return l->name;
	return "?";
}

void tool_option_error(const char *cmd, char *const *argv, const struct option *lo)
{
	const char *arg = optind > 0 && argv[optind - 1] ? argv[optind - 1] : "";
	const char *pre = cmd ? cmd : "", *sep = cmd ? ": " : "";

	if (!strncmp(arg, "--", 2) && arg[2]) {
		const char *name = arg + 2;
		size_t n = strcspn(name, "=");
		const struct option *hit = NULL;
		int matches = 0;
		char alt[256] = "";

		for (const struct option *l = lo; l->name; l++) {
			if (strncmp(l->name, name, n))
				continue;
			if (strlen(l->name) == n) {
				hit = l;
				matches = 1;
				break;
			}
			hit = l;
			matches++;
			snprintf(alt + strlen(alt), sizeof(alt) - strlen(alt), "%s--%s",
				 matches > 1 ? ", " : "", l->name);
		}
		if (optopt && matches == 1 && hit->val == optopt) {
			tool_err("%s%soption '--%s' %s", pre, sep, hit->name,
				 hit->has_arg == no_argument ? "takes no value" : "needs a value");
		} else if (!optopt && matches > 1) {
			tool_err("%s%soption '--%.*s' is ambiguous (%s)", pre, sep, (int)n, name, alt);
		} else {
			tool_err("%s%sunknown option '--%.*s'", pre, sep, (int)n, name);
		}
		return;
	}
	if (optopt > 0 && optopt < 256) {
		for (const struct option *l = lo; l->name; l++)
			if (l->val == optopt) {
				tool_err("%s%soption '-%c' (--%s) needs a value", pre, sep, optopt,
					 l->name);
				return;
			}
		tool_err("%s%sunknown option '-%c'", pre, sep, optopt);
		return;
	}
	tool_err("%s%sunknown option '%s'", pre, sep, arg);
}

bool tool_mentions(const char *msg, const char *path)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (!n)
		return false;
	for (const char *p = msg; (p = strstr(p, path)) != NULL; p++) {
		char after = p[n];

		if ((p == msg || p[-1] == ' ' || p[-1] == '"' || p[-1] == '\'') &&
		    (after == ':' || after == '/' || after == ' ' || after == '"' ||
		     after == '\'' || after == ',' || after == '\0'))
			return true;
	}
	return false;
}

void tool_unpinned_hint(char *msg, size_t len, int allowed, const char *verb)
{
	char *flag = strstr(msg, "HACCEL_HOSTMEM_ALLOW_UNPINNED");
	size_t n;

	if (flag) {
		/* "...; or allow unpinned staging (HACCEL_HOSTMEM_ALLOW_UNPINNED
		 * in hostmem_flags)": the library's advice to a program. */
		char *start = NULL, *end = strchr(flag, ')');

		for (char *p = flag; p > msg; p--)
			if (p[-1] == ';') {
				start = p - 1;
				break;
			}
		if (start && end)
			memmove(start, end + 1, strlen(end + 1) + 1);
	}
	if (allowed || (!strstr(msg, "staging") && !strstr(msg, "registration")))
		return;
	n = strlen(msg);
	if (n < len)
		snprintf(msg + n, len - n,
			 " (--allow-unpinned %s through unpinned, unregistered staging instead)", verb);
}

void tool_weights_error(const char *path, char *msg, size_t len)
{
	struct stat sb;
	json_t *j;

	if (stat(path, &sb) || !S_ISREG(sb.st_mode))
		return;
	j = json_load_file(path, 0, NULL);
	if (json_is_object(j) && !json_object_get(j, "weight_map"))
		snprintf(msg, len,
			 "%s: not a safetensors file or index (a JSON object without \"weight_map\")",
			 path);
	json_decref(j);
}

bool tool_list_has_empty(const char *s)
{
	size_t n = strlen(s);

	return !n || s[0] == ',' || s[n - 1] == ',' || strstr(s, ",,") != NULL;
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
